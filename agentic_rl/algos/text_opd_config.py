"""The ``algorithm`` section of ``text_opd`` (discrete OPD on admissible-command text envs)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentic_rl.algos.base import ENV_NORMALISER_KEYS
from agentic_rl.algos.schedule import Schedule, Scheduled, non_negative


class ManagerConfig(BaseModel):
    """HGPO Manager on text tasks: a subgoal every ``period`` steps or when it is reached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    planner: Literal["expert_plan", "openai", "learned"] = Field(
        "expert_plan", description="expert_plan: the env's solution (an oracle upper bound); "
        "openai: a chat endpoint; learned: a network over templated subgoals, trained by "
        "imitation of the demonstrations' subgoal sequence")
    period: int = Field(5, ge=1)
    hidden: int = Field(128, ge=8, description="learned Manager: width of its scoring layers")
    rl: Literal["none", "group"] = Field(
        "group", description="learned Manager: after imitation, also a group policy-gradient "
        "step on its own (sampled) decisions per batch of rollouts; none: imitation only, "
        "greedy in training too")
    dagger: bool = Field(
        True, description="learned Manager: in the DAgger rounds also imitate, at each of its "
        "decisions in the states the agent reached, the subgoal the handcoded expert pursues "
        "there (needs algorithm.dagger_rounds > 0)")
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _endpoint_given(self) -> "ManagerConfig":
        # at their defaults they pass: a run folder's resolved config.yaml lists every key
        unread = {key for key in ("hidden", "rl", "dagger")
                  if getattr(self, key) != type(self).model_fields[key].default}
        if self.planner != "learned" and unread:
            raise ValueError(f"manager.{sorted(unread)[0]} is a key of the learned Manager; "
                             f"planner {self.planner!r} has no network")
        if self.planner == "openai" and not (self.base_url and self.model):
            raise ValueError("planner 'openai' needs base_url and model (an OpenAI-compatible "
                             "chat endpoint, e.g. base_url: http://localhost:8000/v1)")
        return self


class TextOPDConfig(BaseModel):
    """Hyper-parameters of discrete OPD (``algorithm.name: text_opd``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["text_opd"] = "text_opd"

    @model_validator(mode="before")
    @classmethod
    def _legacy_opd_alpha(cls, raw: Any) -> Any:
        """Run folders written before the shared ``Schedule`` kept the weight in four keys
        (``opd_alpha``, ``opd_alpha_end``, ``opd_alpha_schedule``, ``opd_alpha_steps``)."""
        legacy = ("opd_alpha_end", "opd_alpha_schedule", "opd_alpha_steps")
        if isinstance(raw, dict) and "dagger_games" in raw:  # DAgger rounds now use every env
            raw = dict(raw)
            width = raw.get("games_per_iteration", 8) * raw.get("group_size", 4)
            if raw.pop("dagger_games") != width:
                raise ValueError("dagger_games is gone: a DAgger round plays one episode in "
                                 "each of the games_per_iteration x group_size envs; remove it")
        if not isinstance(raw, dict) or not any(key in raw for key in legacy):
            return raw
        raw = dict(raw)
        start = raw.get("opd_alpha", 1.0)
        end, kind = raw.pop("opd_alpha_end", 0.2), raw.pop("opd_alpha_schedule", "exponential")
        steps = raw.pop("opd_alpha_steps", 200)
        if kind != "constant" and start != 0:
            end = max(end, 1e-8) if kind == "exponential" else end
            raw["opd_alpha"] = {"schedule": kind, "start": start, "end": end, "steps": steps}
        return raw

    @field_validator("opd_alpha")
    @classmethod
    def _non_negative(cls, value: Any) -> Any:
        return non_negative(value, "opd_alpha")
    # envs: games_per_iteration x group_size; no random-action phase, no replay
    unread_keys: ClassVar[tuple[str, ...]] = ENV_NORMALISER_KEYS + (
        "training.learning_starts", "training.buffer_size", "training.overlap_env",
        "environment.num_envs", "verification.reset_on_violation")
    prototype_data_path: str | list[str] | None = Field(
        None, description="ALFWorld demonstration .npz file(s) (`agentic-rl demos`)")
    hidden: int = Field(256, ge=8)
    memory: bool = True
    lr: float = Field(5e-4, gt=0)
    rl: Literal["none", "ppo", "group"] = "group"
    advantage: Literal["episode", "hog"] = "hog"
    hog_levels: int = Field(2, ge=0)
    hog_alpha: float = 1.0
    normalize_std: bool = False
    gamma: float = Field(0.95, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    clip_range: float = Field(0.2, gt=0)
    n_epochs: int = Field(2, ge=1)
    minibatch_episodes: int = Field(16, ge=1)
    ent_coef: float = Field(0.0, ge=0)
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    opd_alpha: Scheduled = Field(
        default_factory=lambda: Schedule(schedule="exponential", start=1.0, end=0.2, steps=200),
        description="distillation weight over RL updates (a number: constant)")
    distill_batch_episodes: int = Field(16, ge=1)
    bc_steps: int = Field(2000, ge=0, description="imitation steps before any RL")
    dagger_rounds: int = Field(0, ge=0, description="after bc_steps: rounds in which each "
                               "env plays one train game (distinct games), the expert labels "
                               "the visited states with its command, and dagger_steps imitation "
                               "steps follow on demos + labelled episodes")
    dagger_steps: int = Field(200, ge=0)
    games_per_iteration: int = Field(8, ge=1)
    group_size: int = Field(4, ge=1, description="episodes per game in one batch")
    max_commands: int = Field(64, ge=2)
    self_prototype_capacity: int = Field(3000, ge=0, description="episodes")
    holdout_games: int = Field(60, ge=1, description="train games kept out for model "
                               "selection; each evaluation plays training.num_eval_episodes "
                               "episodes cycling through them")
    object_match: bool = Field(
        False, description="a per-command feature: whether the command acts on a task word "
        "(the object it takes or moves, the place it goes to); sentence embeddings blur "
        "'take cd 1 from dresser 1' and 'take mug 1 from dresser 1'")
    take_back: bool = Field(
        False, description="a per-command feature: whether a take command takes back an "
        "object the agent itself moved there this episode ('take watch 1 from sidetable 1' "
        "after 'move watch 1 to sidetable 1'), which no ALFWorld task needs")
    object_memory: bool = Field(
        False, description="a per-command feature (needs take_back): whether a 'go to P' "
        "command goes to a place the agent last saw holding an object the task names that it "
        "has not delivered to a place the task names, from its own observations this episode "
        "(pick_two's second object, a search after a wrong put)")
    avoid_revisits: bool = Field(
        False, description="mask, in training and evaluation, each command issued before at "
        "the same place with the world unchanged since (it leads back to a state already "
        "visited; greedy play cannot loop); a demonstration step whose command is masked drops "
        "out of the imitation loss")
    manager: ManagerConfig | None = None
    success_predictor: float = Field(
        0.0, ge=0, description="with the learned Manager: weight of the Worker's intrinsic "
        "reward, the change in a learned prediction that the current subgoal is finished in "
        "its period (0: no predictor)")

    @model_validator(mode="after")
    def _memory_needs_take_back(self) -> "TextOPDConfig":
        if self.object_memory and not self.take_back:
            raise ValueError("object_memory is read above the take-back bit: set "
                             "algorithm.take_back=true too")
        return self

    @model_validator(mode="after")
    def _predictor_needs_learned_manager(self) -> "TextOPDConfig":
        if self.success_predictor and getattr(self.manager, "planner", None) != "learned":
            raise ValueError("success_predictor predicts the learned Manager's subgoals: set "
                             "algorithm.manager.planner=learned (or success_predictor=0)")
        return self
