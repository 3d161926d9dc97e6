"""The config sections of the flat off-policy learners (SAC, OPD, TD3): each algorithm's
section owns its networks and optimisers (``NetworkConfig``), its demonstrations
(``DemoConfig``) and, for OPD, its prototype buffers (``PrototypeBufferConfig``); each
``hgpo_sac`` level has its own ``SACNetworkConfig``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class HERConfig(BaseModel):
    """Hindsight relabelling at sample time (SPEC A2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    strategy: Literal["future", "final", "episode", "none"] = "future"
    relabel_ratio: float = Field(0.8, ge=0, le=1)


class PrioritizedReplayConfig(BaseModel):
    """Proportional prioritised replay (``data.priorities``): transitions drawn in proportion
    to ``(|TD error| + epsilon) ** alpha``, the critic loss weighted by ``(N P(i)) ** -beta``
    with ``beta`` annealed linearly from ``beta`` to 1 over ``training.total_timesteps``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    alpha: float = Field(0.6, ge=0, description="priority exponent (0: uniform)")
    beta: float = Field(0.4, ge=0, le=1, description="importance-sampling exponent at the start")
    epsilon: float = Field(1e-6, gt=0, description="added to |TD error|")


class NetworkConfig(BaseModel):
    """Actor and critic networks and their learning rates."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hidden_sizes: list[int] = Field(default_factory=lambda: [256, 256])
    activation: Literal["relu", "tanh"] = "relu"
    actor_lr: float = Field(1e-3, gt=0)
    critic_lr: float = Field(1e-3, gt=0)


class SACNetworkConfig(NetworkConfig):
    """A SAC learner's networks, optimisers and temperature."""

    alpha_lr: float = Field(1e-3, gt=0)
    init_alpha: float = Field(0.1, gt=0)
    target_entropy: float | Literal["auto"] = "auto"
    # One C++ call for the whole update (gradients, Adam, target update; sac_fused) where
    # sac_grads applies; off, or where the extension cannot be built, the same update runs in
    # Python.
    fused_update: bool = True


class SkillConfig(BaseModel):
    """One named skill: its own prototype buffer, filled from its own expert file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    prototype_data_path: str | None = None
    expert_kwargs: dict[str, float] = Field(default_factory=dict)
    task_ids: list[str] = Field(default_factory=list)


class PhaseSkillsConfig(BaseModel):
    """Skills that are the phases of one task (``data.phase_skills``): demonstrations cut into
    phases, one prototype buffer each, a manager that says which phase a state is in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task: Literal["pick_and_place"] = Field(
        description="whose phases: pick_and_place = reach, grasp, carry, place")
    selection: Literal["rule", "learned"] = Field(
        "learned", description="the phase rule, or a nearest-neighbour classifier fitted to "
        "the phase-labelled demonstration states")


class DemoConfig(BaseModel):
    """Demonstrations (recorded by the scripted expert when the file is missing), mixed into
    the replay and, per skill, kept as prototypes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    prototype_data_path: str | None = Field(None, description="demo .npz file")
    prototype_episodes: int = Field(20, ge=1)
    prototypes_in_replay: bool = True
    skills: list[SkillConfig] = Field(default_factory=list)
    skill_selection: Literal["task_id", "learned"] = "learned"
    phase_skills: PhaseSkillsConfig | None = None

    @model_validator(mode="after")
    def _one_kind_of_skills(self) -> "DemoConfig":
        if self.phase_skills is not None and self.skills:
            raise ValueError("algorithm.phase_skills cuts one demonstration file into phase "
                             "skills; it cannot be combined with algorithm.skills")
        return self


class PrototypeBufferConfig(BaseModel):
    """The prototype buffers a distilling learner samples from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    prototype_capacity: int = Field(100_000, ge=1)
    prototype_sampling: Literal["uniform", "return", "goal"] = "uniform"
    self_prototypes: bool = True
    self_prototype_capacity: int = Field(20_000, ge=0)


class OffPolicyUpdateConfig(BaseModel):
    """Replay batches and target networks of an off-policy update."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    batch_size: int = Field(256, ge=1)
    gamma: float = Field(0.95, gt=0, le=1)
    tau: float = Field(0.05, gt=0, le=1)
    updates_per_step: int = Field(1, ge=1)
    her: HERConfig = Field(default_factory=HERConfig)
    prioritized: PrioritizedReplayConfig | None = Field(
        None, description="prioritised replay (off: uniform)")


class SACConfig(SACNetworkConfig, DemoConfig, OffPolicyUpdateConfig):
    """SAC (the ``algorithm`` section with ``name: sac``): networks, demos and the update."""

    name: Literal["sac"] = "sac"
    unread_keys: ClassVar[tuple[str, ...]] = ()
    num_q: int = Field(2, ge=1)
    action_bound: float = Field(
        1.0, gt=0, le=1, description="share of the env's action range (about its centre) the "
        "policy may use (algos.spaces.shrunk_box); hgpo_sac's worker_action_bound for a flat "
        "learner, e.g. a baseline that acts as a bounded Worker does")

    @model_validator(mode="after")
    def _demos_fit_the_bound(self) -> "SACConfig":
        if self.action_bound < 1 and (self.prototype_data_path or self.skills
                                      or self.phase_skills):
            raise ValueError("algorithm.action_bound < 1 with demonstrations: they are recorded "
                             "over the env's whole action range, outside the bounded policy's")
        return self
