"""HGPO's self-imitation (``algorithm.self_imitation``): both levels also imitate the best
episodes the agent has finished (after Oh et al. 2018, "Self-Imitation Learning").

Why: the noisy policy that explores is what PPO rewards, but deterministic evaluation runs the
Manager's mean goal and the Worker's argmax action, which need not retrace any rewarded
episode (on key-door the argmax Worker walks past the key the sampled one stepped on). Each
PPO minibatch therefore adds, with weight ``coef``, the Worker's negative log-likelihood of the
actions and the Manager's squared distance from its mean goal to the goals of the kept
episodes (``data.elite_episodes``: the best by env return, then the shortest). With ``goals:
hindsight`` (after HAC's hindsight actions) those goals are the states each period actually
reached: exact waypoints of a rewarded path, each with the Worker actions that reached it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agentic_rl.algos import hgpo_losses
from agentic_rl.algos.ppo import flat_obs
from agentic_rl.algos.schedule import value_at
from agentic_rl.data.hierarchical import ManagerSegments, period_end_values
from agentic_rl.data.rollout import Rollout

if TYPE_CHECKING:
    from agentic_rl.algos.hgpo import HGPO


def record(algo: HGPO, rollout: Rollout, seg: ManagerSegments) -> dict[str, float]:
    """Feed a rollout's rows ``[T, N, ...]`` to the kept-episode buffer; returns its stats.
    With ``goals: hindsight`` a row's goal is where its period ended, not the goal set."""
    if algo.elite is None:
        return {}
    cfg, ex = algo.config, rollout.extras
    goal = ex["goal"]
    if cfg.self_imitation.goals == "hindsight":
        goal = period_end_values(algo.phi(rollout.next_obs), seg).clamp(-1.0, 1.0)
    rows = {
        "worker_x": flat_obs(rollout.obs, cfg.worker_obs_keys), "goal": goal,
        "action": rollout.actions, "manager_x": flat_obs(rollout.obs, cfg.manager_obs_keys),
        "new_goal": ex["new_goal"],
    }
    if "action_mask" in rollout.obs:
        rows["mask"] = rollout.obs["action_mask"]
    algo.elite.add_rollout(rows, rollout.rewards, rollout.dones, rollout.obs.get("is_first"))
    return algo.elite.stats()


class ImitationTerm:
    """The ``extra_loss`` of one level's PPO epochs: ``coef *`` the imitation loss of a fresh
    draw of kept rows per minibatch (the PPO minibatch itself is not used); ``metrics()`` gives
    the average unweighted loss over the calls, for logging."""

    def __init__(self, algo: HGPO, level: str) -> None:
        self.algo, self.level = algo, level
        self.coef = value_at(algo.config.self_imitation.coef, algo.env_steps)
        self.total, self.calls = 0.0, 0

    def __call__(self, minibatch: dict[str, torch.Tensor]) -> torch.Tensor:
        algo = self.algo
        if self.coef == 0:  # draws nothing either, so the update is exactly PPO's
            return torch.zeros((), device=algo.device)
        where = "new_goal" if self.level == "manager" else None
        rows = algo.elite.sample(algo.config.self_imitation.batch_size, algo.generator, where)
        if not rows:
            return torch.zeros((), device=algo.device)
        if self.level == "worker":
            log_prob, _ = algo.worker.evaluate(rows["worker_x"], rows["goal"], rows["action"],
                                               rows.get("mask"))
            loss = hgpo_losses.action_imitation_loss(log_prob)
        else:
            mean_goal = algo.manager.policy.mode(algo.manager.features(rows["manager_x"], None))
            loss = hgpo_losses.goal_imitation_loss(mean_goal, rows["goal"])
        self.total, self.calls = self.total + float(loss.detach()), self.calls + 1
        return self.coef * loss

    def metrics(self) -> dict[str, float]:
        if self.calls == 0:
            return {}
        return {"losses/imitation": self.total / self.calls}  # level_metrics adds the level


def term(algo: HGPO, level: str) -> ImitationTerm | None:
    """The imitation term of ``level`` ("worker" or "manager"), or None when switched off."""
    return None if algo.elite is None else ImitationTerm(algo, level)
