"""HGPO with off-policy SAC levels (SPEC A7, continuous tasks such as point and ant mazes).

The Manager is a goal-conditioned SAC whose action is a subgoal in the env's achieved-goal
space (a box ``[-goal_scale, goal_scale]^G``); it picks one at episode start and every
``period`` steps. The Worker is a goal-conditioned SAC that chases the current subgoal. Both
learn from their own replay with hindsight relabelling (``data.period_storage`` keeps
the data): the Worker's transitions store the subgoal as their desired goal, so HER teaches it to
reach any achieved goal; a Manager transition spans one period (start observation, subgoal,
env reward summed over the period, observation at the period's end). Off-policy correction
for the Manager: with probability ``hindsight_actions`` a stored subgoal is replaced by the
goal the Worker actually achieved in that period (HAC's hindsight action transitions), so
old Manager data stays valid as the Worker changes.

With ``subgoals: relative`` (HIRO) the Manager's action is an offset from the achieved goal
where the period starts, and the Worker chases the fixed point ``start + offset`` (HIRO's
goal transition ``h(s, g, s') = s + g - s'`` written in absolute coordinates); the box then
bounds how far a waypoint may lie, and a hindsight subgoal is the offset actually travelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_rl.algos.base import ActMode, check_mode
from agentic_rl.algos.hgpo import level_metrics
from agentic_rl.algos.hgpo_diagnostics import SubgoalStats
from agentic_rl.algos.spaces import resolve_device, spaces_of
from agentic_rl.algos.sac import SAC
from agentic_rl.algos.sac_config import HERConfig, SACConfig, SACNetworkConfig
from agentic_rl.data.period_storage import LevelSettings, PeriodStorage
from agentic_rl.data.replay_storage import episode_states
from agentic_rl.data.storage import StorageSpec
from agentic_rl.envs.goal import goal_functions


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

    def sac_config(self) -> SACConfig:
        return SACConfig(**self.model_dump(include=set(SACNetworkConfig.model_fields)),
                         batch_size=self.batch_size, gamma=self.gamma, tau=self.tau,
                         num_q=self.num_q, her=self.her)


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
    manager: SACLevelConfig = Field(default_factory=lambda: SACLevelConfig(gamma=0.9))
    worker: SACLevelConfig = Field(default_factory=SACLevelConfig)

    @model_validator(mode="after")
    def _penalty_defined(self) -> "HGPOSACConfig":
        if self.subgoal_testing > 0 and self.subgoal_penalty is None and self.manager.gamma >= 1:
            raise ValueError("subgoal_testing with manager.gamma = 1 needs an explicit "
                             "subgoal_penalty (the default is -1 / (1 - manager.gamma))")
        return self


@dataclass
class SubgoalState:
    """Per-env hierarchical state carried between ``act`` calls."""

    goal: torch.Tensor  # [N, G] current subgoal in achieved-goal coordinates
    goal_unit: torch.Tensor  # [N, G] the same subgoal as the Manager's [-1, 1] action
    step_in_period: torch.Tensor  # [N] steps taken under the current subgoal
    testing: torch.Tensor  # [N] bool: the Worker pursues this subgoal without noise


def level_input(obs: dict[str, torch.Tensor], keys: list[str]) -> torch.Tensor:
    """``[N, sum of key sizes]``: the listed observation entries, concatenated."""
    return torch.cat([obs[k].float().reshape(obs[k].shape[0], -1) for k in keys], dim=-1)


def hindsight_subgoals(action: torch.Tensor, achieved_unit: torch.Tensor, ratio: float,
                       generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace each row of the Manager's stored ``action [B, G]`` (in [-1, 1]) by the subgoal
    the Worker actually reached, ``achieved_unit [B, G]`` (clamped to [-1, 1]), with
    probability ``ratio``; returns the actions and the ``[B]`` bool mask of replaced rows."""
    swap = torch.rand(action.shape[0], generator=generator) < ratio
    return torch.where(swap[:, None], achieved_unit.clamp(-1.0, 1.0), action), swap


def penalise_missed(batch: dict[str, torch.Tensor], kept: torch.Tensor, penalty: float
                    ) -> dict[str, torch.Tensor]:
    """HAC's subgoal-testing transitions: rows whose tested subgoal was missed
    (``batch["missed"] [B]``) and kept as stored (``kept [B]`` bool; a hindsight subgoal was
    reached by definition) get reward ``penalty`` and ``terminated = 1``."""
    hit = (batch["missed"] > 0) & kept
    return {**batch, "reward": torch.where(hit, torch.full_like(batch["reward"], penalty),
                                           batch["reward"]),
            "terminated": torch.where(hit, torch.ones_like(batch["terminated"]),
                                      batch["terminated"])}


class HGPOSAC:
    """Manager and Worker SAC learners behind one ``act`` / ``update``.

    Args:
        config: hyper-parameters.
        spaces: ``{"obs": {key: size}, "goal_dim", "act_dim", "action_low", "action_high"}``.
        device: torch device of both levels.
        clip_obs: clip of the normalised inputs.
        seed: seeds uniform exploration and the hindsight draws.
    """

    def __init__(self, config: HGPOSACConfig, spaces: dict[str, Any], device: str = "cpu",
                 clip_obs: float = 5.0, seed: int = 0) -> None:
        self.config = cfg = config
        goal_dim, act_dim = spaces["goal_dim"], spaces["act_dim"]
        self.goal_dim = goal_dim

        def level(level_cfg: SACLevelConfig, act: int, low, high) -> SAC:
            obs_dim = sum(spaces["obs"][k] for k in level_cfg.obs_keys)
            level_spaces = {"obs_dim": obs_dim, "goal_dim": goal_dim, "act_dim": act,
                            "action_low": low, "action_high": high}
            return SAC(level_cfg.sac_config(), level_spaces, device, clip_obs)

        bound = np.full(goal_dim, cfg.goal_scale, dtype=np.float32)
        self.manager = level(cfg.manager, goal_dim, -bound, bound)
        self.worker = level(cfg.worker, act_dim, spaces["action_low"], spaces["action_high"])
        self.generator = torch.Generator().manual_seed(seed)
        self.goal_fns = None  # the env's goal functions, from the storage spec
        self.subgoal_penalty = (cfg.subgoal_penalty if cfg.subgoal_penalty is not None
                                else -1.0 / (1.0 - cfg.manager.gamma))

    @classmethod
    def from_config(cls, config: Any, env: Any) -> HGPOSAC:
        """The learner of an experiment config for a single goal env's spaces."""
        box = spaces_of(env)  # checks for a goal Dict observation and a Box action
        box["obs"] = {k: int(np.prod(s.shape)) for k, s in env.observation_space.spaces.items()}
        learner = cls(config.algorithm, box, resolve_device(config.training.device),
                      config.environment.clip_obs, seed=config.training.seed)
        learner.goal_fns = goal_functions(env)  # evaluation may come before any storage
        return learner

    # ----------------------------------------------------------------------------- acting
    def manager_obs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"observation": level_input(obs, self.config.manager.obs_keys),
                "desired_goal": obs["desired_goal"]}

    def worker_obs(self, obs: dict[str, torch.Tensor], goal: torch.Tensor):
        return {"observation": level_input(obs, self.config.worker.obs_keys),
                "desired_goal": goal}

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], state: SubgoalState | None,
            mode: ActMode = "explore"):
        """One step for ``N`` envs. A new subgoal where ``state`` is None, ``obs["is_first"]``
        is set or the period ran out; ``mode="random"`` draws subgoals and actions uniformly
        (the phase before learning starts).

        Returns:
            ``(env action [N, act_dim], new state, extras)`` with extras ``unit_action``
            (Worker, [-1, 1]), ``goal`` / ``goal_unit`` ``[N, G]``, ``new_goal [N]`` and
            ``period_end [N]`` (the subgoal's last step).
        """
        check_mode(mode)
        n = obs["desired_goal"].shape[0]
        if state is None:
            zeros = torch.zeros(n, self.goal_dim)
            state = SubgoalState(zeros, zeros, torch.full((n,), self.config.period),
                                 torch.zeros(n, dtype=torch.bool))
        new = state.step_in_period >= self.config.period
        if "is_first" in obs:
            new = new | obs["is_first"].bool()
        goal, goal_unit, testing = state.goal, state.goal_unit, state.testing
        if new.any():
            _, _, extras = self.manager.act(self.manager_obs(obs), None, mode)
            proposal_unit = extras["unit_action"]
            proposal = self.manager.unit_to_env(proposal_unit)
            if self.config.subgoals == "relative":
                proposal = obs["achieved_goal"].float() + proposal
            goal = torch.where(new[:, None], proposal, goal)
            goal_unit = torch.where(new[:, None], proposal_unit, goal_unit)
            if self.config.subgoal_testing > 0:  # only training subgoals are tested
                tested = (torch.rand(n, generator=self.generator) < self.config.subgoal_testing
                          if mode == "explore" else torch.zeros(n, dtype=torch.bool))
                testing = torch.where(new, tested, testing)
        action, unit_action = self._worker_act(self.worker_obs(obs, goal), mode, testing)
        step = torch.where(new, 1, state.step_in_period + 1)
        extras = {"unit_action": unit_action, "goal": goal, "goal_unit": goal_unit,
                  "new_goal": new, "period_end": step >= self.config.period}
        if self.config.subgoal_testing > 0:
            extras["testing"] = testing
        return action, SubgoalState(goal, goal_unit, step, testing), extras

    def _worker_act(self, worker_obs: dict[str, torch.Tensor], mode: ActMode,
                    testing: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(env action, unit action)`` ``[N, act_dim]``; envs whose subgoal is tested
        (``testing [N]``) act without exploration noise."""
        action, _, extras = self.worker.act(worker_obs, None, mode)
        unit_action = extras["unit_action"]
        if testing.any():
            quiet, _, quiet_extras = self.worker.act(worker_obs, None, "deterministic")
            action = torch.where(testing[:, None], quiet, action)
            unit_action = torch.where(testing[:, None], quiet_extras["unit_action"], unit_action)
        return action, unit_action

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        return {**extras, "unit_action": self.worker.env_to_unit(env_action)}

    def rows(self, transition: dict[str, torch.Tensor], extras: dict[str, torch.Tensor]):
        """``(Worker row, Manager input before, Manager input after)`` of one env step: the
        Worker's row has the subgoal as its goal, reward and termination against it."""
        goal_fns = self.goal_fns
        keys_now = {"observation": transition["obs"],
                    "achieved_goal": transition["achieved_goal"],
                    "desired_goal": transition["desired_goal"]}
        keys_next = {"observation": transition["next_obs"],
                     "achieved_goal": transition["next_achieved_goal"],
                     "desired_goal": transition["desired_goal"]}
        goal, reached = extras["goal"], transition["next_achieved_goal"]
        row = {"obs": level_input(keys_now, self.config.worker.obs_keys),
               "achieved_goal": transition["achieved_goal"], "desired_goal": goal,
               "action": extras["unit_action"], "reward": goal_fns.reward_fn(reached, goal),
               "next_obs": level_input(keys_next, self.config.worker.obs_keys),
               "next_achieved_goal": reached,
               "terminated": (goal_fns.success_fn(reached, goal) if goal_fns.terminates_on_success
                              else torch.zeros(goal.shape[0]))}
        keys = self.config.manager.obs_keys
        return row, level_input(keys_now, keys), level_input(keys_next, keys)

    def make_storage(self, spec: StorageSpec) -> PeriodStorage:
        self.goal_fns = spec.goal_fns
        levels = {name: LevelSettings(
            sac.obs_normalizer.mean.shape[0], self.goal_dim, sac.action_low.shape[0],
            level_cfg.batch_size, level_cfg.her, level_cfg.update_every,
            ("missed",) if name == "manager" and self.config.subgoal_testing > 0 else ())
            for name, sac, level_cfg in (("worker", self.worker, self.config.worker),
                                         ("manager", self.manager, self.config.manager))}
        return PeriodStorage(spec, levels, self.config.period, self.rows)

    def observe(self, episode: dict[str, dict[str, torch.Tensor]]) -> None:
        """Normaliser statistics from one finished episode: its ``worker`` and ``manager``
        transitions as the storage keeps them (fields ``[L, ...]``)."""
        for sac, steps in ((self.worker, episode["worker"]), (self.manager, episode["manager"])):
            sac.observe(episode_states(steps))

    def eval_diagnostics(self) -> SubgoalStats | None:
        """Subgoal quality of evaluation episodes (``train.evaluate``); None for a learner
        built without an env (no success test to judge subgoals by)."""
        return None if self.goal_fns is None else SubgoalStats(self.goal_fns.success_fn)

    # ----------------------------------------------------------------------------- learning
    def update(self, batch: dict[str, dict[str, torch.Tensor]]) -> dict[str, float]:
        """One SAC step per level present in ``batch`` (keys ``worker`` / ``manager``, each a
        replay batch as ``SAC.update`` takes it); metrics prefixed by level."""
        metrics: dict[str, float] = {}
        if "worker" in batch:
            metrics |= level_metrics(self.worker.update(batch["worker"]), "worker")
        if "manager" in batch:
            manager_batch = dict(batch["manager"])
            achieved = manager_batch["next_achieved_goal"]
            if self.config.subgoals == "relative":  # the offset travelled in the period
                achieved = achieved - manager_batch["achieved_goal"]
            achieved = self.manager.env_to_unit(achieved)
            manager_batch["action"], swapped = hindsight_subgoals(
                manager_batch["action"], achieved, self.config.hindsight_actions, self.generator)
            if "missed" in manager_batch:
                manager_batch = penalise_missed(manager_batch, ~swapped, self.subgoal_penalty)
                metrics["hgpo/missed_tested_share"] = float(manager_batch["missed"].mean())
            metrics |= level_metrics(self.manager.update(manager_batch), "manager")
        return metrics

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"manager": self.manager.state_dict(), "worker": self.worker.state_dict(),
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.manager.load_state_dict(state["manager"])
        self.worker.load_state_dict(state["worker"])
        self.generator.set_state(state["generator"])
