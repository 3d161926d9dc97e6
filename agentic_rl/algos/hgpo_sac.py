"""HGPO with off-policy SAC levels (SPEC A7, continuous tasks such as point and ant mazes).

The Manager is a goal-conditioned SAC whose action is a subgoal in the env's achieved-goal
space (a box ``[-goal_scale, goal_scale]^G``); it picks one at episode start and every
``period`` steps. The Worker is a goal-conditioned SAC that chases the current subgoal. Both
learn from their own replay with hindsight relabelling (``data.period_storage`` keeps
the data): the Worker's transitions store the subgoal as their desired goal, so HER teaches it to
reach any achieved goal; a Manager transition spans one period (start observation, subgoal,
env reward summed over the period, observation at the period's end; with the Manager's HER
on, its reward is recomputed at the period's end state instead). Off-policy correction
for the Manager: with probability ``hindsight_actions`` a stored subgoal is replaced by the
goal the Worker actually achieved in that period (HAC's hindsight action transitions), so
old Manager data stays valid as the Worker changes.

With ``subgoals: relative`` (HIRO) the Manager's action is an offset from the achieved goal
where the period starts, and the Worker chases the fixed point ``start + offset`` (HIRO's
goal transition ``h(s, g, s') = s + g - s'`` written in absolute coordinates); the box then
bounds how far a waypoint may lie, and a hindsight subgoal is the offset actually travelled.

With ``planner`` a landmark graph over visited states (``hgpo_planner``) sets the subgoals of
evaluation episodes (``use: eval``) or of every episode: waypoints on shortest routes whose
edge lengths the Worker's critic gives; ``hgpo_waypoints`` says when it plans and when it is
rebuilt. ``visit_planner`` does the same over a graph of visited grid cells whose edges are
steps the replay holds (``hgpo_visits``): no Worker values, so any Worker reward and goal input.

With ``worker_goal_input: relative`` the Worker's networks read the offset still to go,
``subgoal - achieved_goal``, recomputed every step, appended to its observation (HIRO's goal
transition as the network sees it); its replay keeps absolute subgoals, so HER and the rewards
are unchanged, and ``relative_goal_inputs`` converts each sampled batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from agentic_rl.algos.base import ActMode, check_mode
from agentic_rl.algos.hgpo import level_metrics
from agentic_rl.algos.hgpo_diagnostics import SubgoalStats
from agentic_rl.algos.hgpo_losses import (distance_intrinsic_reward, hindsight_subgoals,
                                          manager_inputs, offset_appended, penalise_missed,
                                          worker_inputs)
from agentic_rl.algos.hgpo_planner import steps_from_q
from agentic_rl.algos.hgpo_sac_config import HGPOSACConfig, SACLevelConfig, check_env_fit
from agentic_rl.algos.hgpo_visits import VisitWaypoints
from agentic_rl.algos.hgpo_waypoints import make_waypoints
from agentic_rl.algos.spaces import resolve_device, spaces_of
from agentic_rl.algos.sac import SAC
from agentic_rl.data.period_storage import LevelSettings, PeriodStorage
from agentic_rl.data.replay_storage import episode_states
from agentic_rl.data.storage import StorageSpec
from agentic_rl.envs.goal import goal_functions

__all__ = ["HGPOSAC", "HGPOSACConfig", "SACLevelConfig", "SubgoalState", "hindsight_subgoals",
           "penalise_missed"]


@dataclass
class SubgoalState:
    """Per-env hierarchical state carried between ``act`` calls."""

    goal: torch.Tensor  # [N, G] current subgoal in achieved-goal coordinates
    goal_unit: torch.Tensor  # [N, G] the same subgoal as the Manager's [-1, 1] action
    step_in_period: torch.Tensor  # [N] steps taken under the current subgoal
    testing: torch.Tensor  # [N] bool: the Worker pursues this subgoal without noise
    hop: torch.Tensor | None = None  # [N, 3] planner only: origin and target landmark, steps


def level_input(obs: dict[str, torch.Tensor], keys: list[str]) -> torch.Tensor:
    """``[N, sum of key sizes]``: the listed observation entries, concatenated."""
    return torch.cat([obs[k].float().reshape(obs[k].shape[0], -1) for k in keys], dim=-1)


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

        self.relative_worker = cfg.worker_goal_input == "relative"
        self.stored_obs_dim = {name: sum(spaces["obs"][k] for k in level_cfg.obs_keys)
                               for name, level_cfg in (("worker", cfg.worker),
                                                       ("manager", cfg.manager))}

        def level(name: str, level_cfg: SACLevelConfig, act: int, low, high,
                  action_bound: float = 1.0) -> SAC:
            # a relative Worker reads its goal as part of the observation (no goal input)
            appended = name == "worker" and self.relative_worker
            level_spaces = {"obs_dim": self.stored_obs_dim[name] + (goal_dim if appended else 0),
                            "goal_dim": 0 if appended else goal_dim, "act_dim": act,
                            "action_low": low, "action_high": high}
            return SAC(level_cfg.sac_config(action_bound), level_spaces, device, clip_obs)

        bound = np.full(goal_dim, cfg.goal_scale, dtype=np.float32)
        self.manager = level("manager", cfg.manager, goal_dim, -bound, bound)
        self.worker = level("worker", cfg.worker, act_dim, spaces["action_low"],
                            spaces["action_high"], cfg.worker_action_bound)
        self.generator = torch.Generator().manual_seed(seed)
        self.goal_fns = None  # the env's goal functions, from the storage spec
        self.worker_goal_fns = None  # the same, with the Worker's reward (worker_reward)
        self.reward_scale = (1.0, 0.0)  # the Worker's reward at / away from its goal
        self.subgoal_penalty = (cfg.subgoal_penalty if cfg.subgoal_penalty is not None
                                else -1.0 / (1.0 - cfg.manager.gamma))
        self.planning = make_waypoints(cfg, self.worker_steps,
                                       lambda a, g: self.goal_fns.success_fn(a, g),
                                       self.manager.env_to_unit)
        self.storage: PeriodStorage | None = None  # the planner's landmarks come from it

    @classmethod
    def from_config(cls, config: Any, env: Any) -> HGPOSAC:
        """The learner of an experiment config for a single goal env's spaces."""
        box = spaces_of(env)  # checks for a goal Dict observation and a Box action
        box["obs"] = {k: int(np.prod(s.shape)) for k, s in env.observation_space.spaces.items()}
        learner = cls(config.algorithm, box, resolve_device(config.training.device),
                      config.environment.clip_obs, seed=config.training.seed)
        learner.set_goal_functions(goal_functions(env))  # evaluation may precede any storage
        return learner

    def set_goal_functions(self, goal_fns: Any) -> None:
        """The env's reward and success tests; the planner reads the Worker's reward scale
        (``hit`` at the goal, ``miss`` elsewhere) from them."""
        self.goal_fns = goal_fns
        self.worker_goal_fns = goal_fns if self.config.worker_reward == "env" else \
            replace(goal_fns, reward_fn=distance_intrinsic_reward)
        goal = torch.zeros(1, self.goal_dim)
        self.reward_scale = (float(goal_fns.reward_fn(goal, goal)[0]),
                             float(goal_fns.reward_fn(goal, goal + 1e6)[0]))
        check_env_fit(self.config, goal_fns, self.reward_scale[0])

    # ----------------------------------------------------------------------------- acting
    def manager_obs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"observation": level_input(obs, self.config.manager.obs_keys),
                "desired_goal": obs["desired_goal"]}

    def worker_obs(self, obs: dict[str, torch.Tensor], goal: torch.Tensor):
        """The Worker's act input for subgoals ``goal [N, G]`` (see ``worker_goal_input``)."""
        own = level_input(obs, self.config.worker.obs_keys)
        if self.relative_worker:
            return {"observation": offset_appended(own, goal, obs["achieved_goal"].float())}
        return {"observation": own, "desired_goal": goal}

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
        hop = None
        if self.planning is not None:
            self.planning.before_act(mode, self.storage, self.generator)
            if self.planning.plans(mode):
                goal, goal_unit, hop = self.planning.subgoals(
                    level_input(obs, self.config.worker.obs_keys), obs, new, state.goal,
                    state.goal_unit, state.hop)
        action, unit_action = self._worker_act(self.worker_obs(obs, goal), mode, testing)
        step = torch.where(new, 1, state.step_in_period + 1)
        extras = {"unit_action": unit_action, "goal": goal, "goal_unit": goal_unit,
                  "new_goal": new, "period_end": step >= self.config.period}
        if self.config.subgoal_testing > 0:
            extras["testing"] = testing
        return action, SubgoalState(goal, goal_unit, step, testing, hop), extras

    @torch.no_grad()
    def worker_steps(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """``[B]`` env steps from Worker observations ``obs [B, o]`` to goals ``goal [B, G]``
        as the Worker's critic values them (``hgpo_planner.steps_from_q``)."""
        device = self.worker.device
        x = self.worker.policy_input(obs.to(device), goal.to(device))
        q = self.worker.critic(x, self.worker.actor.deterministic(x)).amin(0)
        return steps_from_q(q, self.config.worker.gamma, *self.reward_scale).cpu()

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
        goal_fns = self.worker_goal_fns
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
        if goal_fns.terminates_on_failure:  # the env ended it short of its own goal
            row["failed"] = transition["terminated"].float() * (1.0 - self.goal_fns.success_fn(
                reached, transition["desired_goal"]))
        keys = self.config.manager.obs_keys
        return row, level_input(keys_now, keys), level_input(keys_next, keys)

    def make_storage(self, spec: StorageSpec) -> PeriodStorage:
        self.set_goal_functions(spec.goal_fns)
        levels = {name: LevelSettings(
            self.stored_obs_dim[name], self.goal_dim, sac.action_low.shape[0],
            level_cfg.batch_size, level_cfg.her, level_cfg.update_every,
            self.extra_fields(name, spec.goal_fns),
            self.worker_goal_fns if name == "worker" else None)
            for name, sac, level_cfg in (("worker", self.worker, self.config.worker),
                                         ("manager", self.manager, self.config.manager))}
        self.storage = PeriodStorage(spec, levels, self.config.period, self.rows)
        return self.storage

    def extra_fields(self, level: str, goal_fns: Any) -> tuple[str, ...]:
        """The level's own replay fields: the Manager's ``missed`` (subgoal testing), the
        Worker's ``failed`` (an env that ends episodes in failure)."""
        if level == "manager":
            return ("missed",) if self.config.subgoal_testing > 0 else ()
        return ("failed",) if goal_fns.terminates_on_failure else ()

    def observe(self, episode: dict[str, dict[str, torch.Tensor]]) -> None:
        """Normaliser statistics from one finished episode: its ``worker`` and ``manager``
        transitions as the storage keeps them (fields ``[L, ...]``)."""
        for sac, steps in ((self.worker, episode["worker"]), (self.manager, episode["manager"])):
            states = episode_states(steps)
            if sac is self.worker and self.relative_worker:
                goal = torch.cat([steps["desired_goal"], steps["desired_goal"][-1:]])
                states = {"observation": offset_appended(states["observation"], goal,
                                                         states["achieved_goal"])}
            sac.observe(states)

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
            metrics |= level_metrics(self.worker.update(self.worker_batch(batch["worker"])),
                                     "worker")
            if self.planning is not None:
                metrics |= self.planning.after_worker_update(self.worker.num_updates,
                                                             self.storage, self.generator)
        if "manager" in batch:
            sampled = batch["manager"]
            achieved = sampled["next_achieved_goal"]
            if self.config.subgoals == "relative":  # the offset travelled in the period
                achieved = achieved - sampled["achieved_goal"]
            manager_batch, _ = manager_inputs(sampled, self.manager.env_to_unit(achieved),
                                              self.config.hindsight_actions,
                                              self.subgoal_penalty, self.generator)
            if "missed" in manager_batch:
                metrics["hgpo/missed_tested_share"] = float(manager_batch["missed"].mean())
            metrics |= level_metrics(self.manager.update(manager_batch), "manager")
        return metrics

    def worker_batch(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A sampled Worker batch as its SAC update reads it (``hgpo_losses.worker_inputs``)."""
        cfg = self.config
        return worker_inputs(batch, cfg.worker.gamma, cfg.worker_failure_cost,
                             cfg.worker_action_cost, self.relative_worker)

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        state = {"manager": self.manager.state_dict(), "worker": self.worker.state_dict(),
                 "generator": self.generator.get_state()}
        if self.planning is not None:
            state["planner"] = self.planning.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.manager.load_state_dict(state["manager"])
        self.worker.load_state_dict(state["worker"])
        self.generator.set_state(state["generator"])
        if isinstance(self.planning, VisitWaypoints):  # derived data: rebuilt when missing
            self.planning.load_state_dict(state.get("planner"))
        elif self.planning is not None:
            self.planning.load_state_dict(state["planner"])
