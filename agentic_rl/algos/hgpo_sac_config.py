"""The config of HGPO with SAC levels (``algorithm.name: hgpo_sac``; see ``algos.hgpo_sac``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_rl.algos.hgpo_planner import PlannerConfig
from agentic_rl.algos.hgpo_visits import VisitPlannerConfig
from agentic_rl.algos.sac_config import HERConfig, SACConfig, SACNetworkConfig


class SACLevelConfig(SACNetworkConfig):
    """Networks, optimisers and SAC update of one level (Manager or Worker)."""

    obs_keys: list[str] = Field(default_factory=lambda: ["observation"],
                                description="observation keys this level reads (concatenated)")
    batch_size: int = Field(256, ge=1)
    gamma: float = Field(0.95, gt=0, le=1)
    tau: float = Field(0.05, gt=0, le=1)
    num_q: int = Field(2, ge=1)
    her: HERConfig = Field(default_factory=HERConfig)
    update_every: int = Field(1, ge=1, description="one gradient step per this many env steps")

    def sac_config(self, action_bound: float = 1.0) -> SACConfig:
        """This level as a SAC learner's config (``action_bound``: the Worker's bound)."""
        return SACConfig(**self.model_dump(include=set(SACNetworkConfig.model_fields)),
                         batch_size=self.batch_size, gamma=self.gamma, tau=self.tau,
                         num_q=self.num_q, her=self.her, action_bound=action_bound)


class HGPOSACConfig(BaseModel):
    """HGPO with SAC levels (the ``algorithm`` section of a config with ``name: hgpo_sac``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["hgpo_sac"] = "hgpo_sac"
    unread_keys: ClassVar[tuple[str, ...]] = (
        "environment.normalize_obs", "environment.normalize_goal")
    period: int = Field(10, ge=1, description="C: env steps per Manager subgoal")
    subgoals: Literal["absolute", "relative"] = Field(
        "absolute", description="absolute: a subgoal is a point of the achieved-goal space; "
        "relative (HIRO): an offset from the achieved goal where its period starts")
    goal_scale: float = Field(1.0, gt=0, description="subgoals (relative: offsets) lie in "
                              "[-goal_scale, goal_scale]")
    hindsight_actions: float = Field(
        0.5, ge=0, le=1, description="share of Manager samples whose subgoal becomes the "
        "achieved goal at the period's end")
    subgoal_testing: float = Field(
        0.0, ge=0, le=1, description="HAC: share of training subgoals the Worker pursues "
        "without exploration noise; a tested subgoal it does not reach in its period gives "
        "the Manager subgoal_penalty with no bootstrap")
    subgoal_penalty: float | None = Field(
        None, le=0, description="reward of a missed tested subgoal (default "
        "-1 / (1 - manager.gamma), the value of never reaching the goal)")
    worker_reward: Literal["env", "distance"] = Field(
        "env", description="the Worker's reward against its subgoal: env (the env's own reward "
        "function, e.g. sparse 0 / -1) or distance (HIRO: -||achieved' - subgoal||, dense)")
    worker_failure_cost: float = Field(
        1.0, ge=0, description="with an env that ends episodes in failure (e.g. "
        "environment.kwargs.terminate_when_unhealthy): a failed step is absorbing for the "
        "Worker at (reward - worker_failure_cost) / (1 - gamma), below the value of never "
        "reaching the subgoal (as Ant-v5's healthy reward of 1 per step alive)")
    worker_action_cost: float = Field(
        0.0, ge=0, description="subtracted from the Worker's reward per unit of ||a||^2 (its "
        "actions in [-1, 1]), as Ant-v5's ctrl_cost: the distance reward alone pays for "
        "torques so large that the ant jumps and lands on its back")
    worker_action_bound: float = Field(
        1.0, gt=0, le=1, description="share of the env's action range (about its centre) the "
        "Worker may use: Gymnasium's ant has gear 150, HIRO's ant a torque limit of 30 (0.2 "
        "of it); uniform random actions put Gymnasium's ant on its back within 500 steps in "
        "10 of 10 episodes at 1.0, in none at 0.3 (benchmarks/ant_posture.py --random-bounds)")
    worker_goal_input: Literal["absolute", "relative"] = Field(
        "absolute", description="the goal the Worker's networks read: absolute (the subgoal "
        "point) or relative (HIRO: subgoal minus the achieved goal, recomputed every step, so "
        "one skill such as 'two units north' serves every place; leave the agent's own "
        "position out of worker.obs_keys to make the Worker translation invariant)")
    planner: PlannerConfig | None = Field(
        None, description="subgoals from a graph over visited states (hgpo_planner); None: "
        "the learned Manager's")
    visit_planner: VisitPlannerConfig | None = Field(
        None, description="subgoals along a graph of the grid cells the Worker's replay "
        "stepped between (hgpo_visits; needs no Worker values, so it works with any "
        "worker_reward and worker_goal_input); None: the learned Manager's")
    manager: SACLevelConfig = Field(default_factory=lambda: SACLevelConfig(gamma=0.9))
    worker: SACLevelConfig = Field(default_factory=SACLevelConfig)

    def training_part(self) -> "HGPOSACConfig":
        """This config less what only evaluation reads: a ``visit_planner`` with ``use: eval``
        draws no random numbers and changes no training state, so a resumed run may add,
        change or drop it (``train.run.prepare_run_dir``)."""
        if self.visit_planner is not None and self.visit_planner.use == "eval":
            return self.model_copy(update={"visit_planner": None})
        return self

    @model_validator(mode="after")
    def _planner_reads_the_workers_values(self) -> "HGPOSACConfig":
        if self.planner is not None and self.worker_reward == "distance":
            raise ValueError("algorithm.planner reads step counts from a Worker trained on the "
                             "env's sparse reward; it cannot with worker_reward: distance")
        if self.planner is not None and self.worker_goal_input == "relative":
            raise ValueError("algorithm.planner values landmark pairs with the Worker's critic "
                             "on absolute goals; it cannot with worker_goal_input: relative")
        if self.planner is not None and self.visit_planner is not None:
            raise ValueError("algorithm.planner and algorithm.visit_planner both choose the "
                             "subgoals: keep one")
        return self

    @model_validator(mode="after")
    def _penalty_defined(self) -> "HGPOSACConfig":
        if self.subgoal_testing > 0 and self.subgoal_penalty is None and self.manager.gamma >= 1:
            raise ValueError("subgoal_testing with manager.gamma = 1 needs an explicit "
                             "subgoal_penalty (the default is -1 / (1 - manager.gamma))")
        return self


def check_env_fit(config: HGPOSACConfig, goal_fns: Any, reward_at_goal: float) -> None:
    """Config keys the env's goal functions (``envs.goal.GoalFunctions``) leave unread or
    cannot serve: ``ConfigError`` (the env is known only once the storage is built)."""
    from agentic_rl.config import ConfigError

    default_cost = HGPOSACConfig.model_fields["worker_failure_cost"].default
    if config.worker_failure_cost != default_cost and not goal_fns.terminates_on_failure:
        raise ConfigError("algorithm.worker_failure_cost is read only with an env that ends "
                          "episodes in failure (environment.kwargs.terminate_when_unhealthy"
                          " or terminate_when_flipped for the ant); remove it")
    if config.planner is not None and not goal_fns.terminates_on_success and reward_at_goal != 0:
        raise ConfigError("algorithm.planner reads distances from the Worker's values, which "
                          "needs an env that ends episodes on success or gives 0 at the goal; "
                          "set environment.kwargs.continuing_task: false or drop the planner")
