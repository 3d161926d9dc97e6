"""The landmark graph in ``hgpo_sac``'s loop: when it plans, when it is rebuilt, and the
subgoals it hands the Worker (the graph itself and its search are ``hgpo_planner``'s).

The graph is rebuilt from the Worker's replay every ``refresh_every`` Worker updates. With
``use: eval`` a rebuild that falls due waits for the next evaluation's first planned step
(it is ``owed``), so training pays for one build per evaluation, not one per refresh; the
metrics of a build made while acting are handed to the next update's metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from agentic_rl.algos.base import ActMode
from agentic_rl.algos.hgpo_planner import DistanceFn, LandmarkGraph, PlannerConfig
from agentic_rl.algos.hgpo_visits import VisitWaypoints


class GraphWaypoints:
    """The graph and its rebuild schedule, as one ``HGPOSAC`` uses them.

    Args:
        config: the resolved ``algorithm.planner``.
        distance: Worker steps between observations ``[B, o]`` and goals ``[B, G]``.
        success_fn: the env's success test ``(achieved [B, G], goal [B, G]) -> [B]``.
        to_unit: the Manager's action scaling (subgoal offset -> [-1, 1]).
        relative: the Manager's actions are offsets from the achieved goal.
    """

    def __init__(self, config: PlannerConfig, distance: DistanceFn,
                 success_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 to_unit: Callable[[torch.Tensor], torch.Tensor], relative: bool) -> None:
        self.config = config
        self.graph = LandmarkGraph(config, distance, success_fn)
        self.success_fn = success_fn
        self.to_unit = to_unit
        self.relative = relative
        self.owed = False  # use: eval; a rebuild fell due since the last evaluation
        self.pending: dict[str, float] = {}  # metrics of a build made while acting

    def plans(self, mode: ActMode) -> bool:
        """Whether the graph chooses this step's new subgoals."""
        if not self.graph.ready or mode == "random":
            return False
        return mode == "deterministic" or self.config.use == "train_and_eval"

    def before_act(self, mode: ActMode, storage: Any, generator: torch.Generator) -> None:
        """Make an owed rebuild where an evaluation plans first."""
        if mode == "deterministic" and self.owed and storage is not None:
            self.pending, self.owed = self.refresh(storage, generator), False

    def subgoals(self, worker_input: torch.Tensor, obs: dict[str, torch.Tensor],
                 new: torch.Tensor, goal: torch.Tensor, goal_unit: torch.Tensor,
                 hop: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(subgoal [N, G], Manager action in [-1, 1] [N, G], hop [N, 3])`` from the graph
        (``LandmarkGraph.follow``) for Worker inputs ``[N, o]``; ``goal``, ``goal_unit`` and
        ``hop`` are the current ones. The action (clamped to the Manager's box) is what the
        Manager's replay stores: the waypoint held at the period's start."""
        achieved = obs["achieved_goal"].float()
        first = torch.full((achieved.shape[0],), hop is None)
        if "is_first" in obs:
            first |= obs["is_first"].bool()
        new_goal, new_hop = self.graph.follow(
            worker_input, achieved, obs["desired_goal"].float(), goal, hop, new, first,
            self.success_fn(achieved, goal).bool())
        offset = new_goal - achieved if self.relative else new_goal
        new_unit = torch.where(new[:, None], self.to_unit(offset).clamp(-1.0, 1.0), goal_unit)
        return new_goal, new_unit, new_hop

    def after_worker_update(self, worker_updates: int, storage: Any,
                            generator: torch.Generator) -> dict[str, float]:
        """A rebuild where one falls due (or the debt of one, under ``use: eval``) and the
        metrics of any build made since the previous update."""
        metrics: dict[str, float] = {}
        if storage is not None and worker_updates % self.config.refresh_every == 0:
            if self.config.use == "eval":
                self.owed = True
            else:
                metrics |= self.refresh(storage, generator)
        metrics |= self.pending
        self.pending = {}
        return metrics

    def refresh(self, storage: Any, generator: torch.Generator) -> dict[str, float]:
        """Rebuild the graph from ``candidates`` Worker replay rows; the graph's metrics and
        the hops that failed since the previous build."""
        rows = storage.replays["worker"].sample(self.config.candidates, generator)
        failed = self.graph.failed_hops
        return {**self.graph.build(rows["obs"], rows["achieved_goal"]),
                "planner/failed_hops": float(failed)}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**self.graph.state_dict(), "owed": torch.tensor(self.owed)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.graph.load_state_dict(state)
        self.owed = bool(state.get("owed", False))


def make_waypoints(cfg: Any, distance: DistanceFn,
                   success_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   to_unit: Callable[[torch.Tensor], torch.Tensor]
                   ) -> GraphWaypoints | VisitWaypoints | None:
    """The planner of an ``hgpo_sac`` config (``cfg``: its ``algorithm`` section):
    ``planner``'s landmark graph, ``visit_planner``'s visit graph, or None."""
    relative = cfg.subgoals == "relative"
    if cfg.planner is not None:
        return GraphWaypoints(cfg.planner.resolved(cfg.period), distance, success_fn, to_unit,
                              relative)
    if cfg.visit_planner is not None:
        return VisitWaypoints(cfg.visit_planner, cfg.visit_planner.reach or cfg.goal_scale,
                              success_fn, to_unit, relative)
    return None
