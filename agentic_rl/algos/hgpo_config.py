"""The config of HGPO (``algorithm.name: hgpo``): period, goal space, rewards, stabilisers
and each level's PPO update (see ``algos.hgpo``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentic_rl.algos.base import ENV_NORMALISER_KEYS, ON_POLICY_TRAINING_KEYS
from agentic_rl.algos.curiosity import CuriosityConfig
from agentic_rl.algos.ppo import PPOUpdateConfig
from agentic_rl.algos.schedule import Schedule, Scheduled, non_negative


class LevelConfig(PPOUpdateConfig):
    """PPO settings of one level (Manager or Worker)."""

    update_every: int = Field(1, ge=1, description="update this level every k rollouts")


class SelfImitationConfig(BaseModel):
    """``self_imitation``: both levels also imitate the best episodes the agent finished."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    coef: Scheduled = Field(0.1, description="weight of the imitation losses (Worker: -log "
                            "pi(a | s, g); Manager: squared distance of its mean goal to the "
                            "goal it set): a constant or a Schedule over env steps")
    episodes: int = Field(16, ge=1, description="how many of the best finished episodes (env "
                          "return, then shortest) are kept")
    batch_size: int = Field(64, ge=1, description="imitated rows per PPO minibatch and level")
    goals: Literal["hindsight", "stored"] = Field(
        "hindsight", description="the goal each kept row is imitated with: where its period "
        "ended (hindsight: a waypoint the Worker reached) or the goal the Manager had set")

    @field_validator("coef")
    @classmethod
    def _non_negative(cls, value):
        return non_negative(value, "self_imitation coef")


def log_std_cap(raw: Any) -> Any:
    """``manager_log_std_cap`` as a ``Schedule`` over env steps; also reads the older
    ``{start_step, end_step, start, end}`` form (linear from ``start_step`` to ``end_step``)."""
    if isinstance(raw, dict) and "end_step" in raw:
        raw = dict(raw)
        end_step = raw.pop("end_step")
        if end_step <= raw.get("start_step", 0):
            raise ValueError(f"end_step {end_step} must exceed start_step "
                             f"{raw.get('start_step', 0)}")
        raw["steps"] = end_step - raw.get("start_step", 0)
        raw.setdefault("start", 1.0)
        raw.setdefault("end", -2.0)
    return raw


class HGPOConfig(BaseModel):
    """HGPO hyper-parameters (the ``algorithm`` section of a config with ``name: hgpo``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["hgpo"] = "hgpo"
    unread_keys: ClassVar[tuple[str, ...]] = ON_POLICY_TRAINING_KEYS + ENV_NORMALISER_KEYS
    period: int = Field(8, ge=1, description="C: steps per Manager goal")
    rollout_steps: int = Field(128, ge=1)
    activation: Literal["tanh", "relu"] = "tanh"
    manager_obs_keys: list[str] = Field(default_factory=lambda: ["observation", "desired_goal"])
    worker_obs_keys: list[str] = Field(default_factory=lambda: ["observation"])
    goal_space: Literal["achieved_goal", "learned"] = "achieved_goal"
    goal_scale: float = Field(1.0, gt=0, description="achieved_goal / goal_scale lies in [-1, 1]")
    goal_dim: int = Field(2, ge=1, description="size of the learned goal space")
    encoder_hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    encoder_lr: float = Field(1e-3, gt=0)
    encoder_tau: float = Field(0.05, gt=0, le=1, description="EMA rate of the target encoder")
    encoder_offset: int = Field(3, ge=1, description="steps between contrastive positives")
    contrastive_temperature: float = Field(0.1, gt=0)
    conditioning: Literal["concat", "film"] = "concat"
    continuous_head: Literal["tanh", "gaussian"] = "tanh"
    intrinsic_reward: Literal["distance", "success_predictor"] = "distance"
    intrinsic_scale: float = Field(1.0, gt=0)
    curiosity: CuriosityConfig | None = Field(None, description="RND bonus for the Worker")
    manager_curiosity: CuriosityConfig | None = Field(
        None, description="RND bonus of the states reached in a period, summed into the "
        "Manager's period reward (goals that lead somewhere new pay before any success)")
    self_imitation: SelfImitationConfig | None = Field(
        None, description="imitate the agent's own best episodes at both levels, so the "
        "deterministic policy (mean goal, argmax action) keeps a solution the noisy one found")
    goal_tolerance: float = Field(0.1, gt=0, description="phi distance that counts as reached")
    manager_init_log_std: float = Field(0.0, description="initial log std of the goal noise")
    manager_log_std_cap: Schedule | None = Field(
        None, description="upper bound on the Manager's pre-tanh log std over env steps "
        "(annealing it makes the mean goal, used in evaluation, the goal its rollouts were "
        "rewarded for); None: unbounded")

    @field_validator("manager_log_std_cap", mode="before")
    @classmethod
    def _legacy_cap(cls, raw: Any) -> Any:
        return log_std_cap(raw)
    manager_recurrent: bool = False
    gru_hidden: int = Field(64, ge=1)
    goal_change_coef: float = Field(0.0, ge=0)
    relabel_goals: bool = False
    relabel_candidates: int = Field(8, ge=2)
    relabel_std: float = Field(0.2, gt=0)
    manager: LevelConfig = Field(default_factory=LevelConfig)
    worker: LevelConfig = Field(default_factory=LevelConfig)

    @model_validator(mode="after")
    def _imitation_needs_feed_forward_manager(self) -> HGPOConfig:
        if self.self_imitation is not None and self.manager_recurrent:
            raise ValueError("self_imitation imitates the Manager from single states: it needs "
                             "manager_recurrent: false")
        return self
