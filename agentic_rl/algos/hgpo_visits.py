"""Waypoints along the places the agent has already been (``algorithm.visit_planner`` of
``hgpo_sac``): a graph over grid cells of the achieved-goal space, with an edge wherever one
env step of the Worker's replay went from one cell to another, and each subgoal the point
``reach`` ahead along the shortest route through that graph to the env goal.

The critic-valued landmark graph (``hgpo_planner``) needs a Worker whose values are step
counts (the env's sparse reward); a Worker trained on HIRO's dense distance reward has none.
This graph needs no values at all: its edges are transitions that happened, so it never draws
one through a wall, and it is exact about what the agent has done rather than what a critic
believes (as Go-Explore's cells, or HRAC's adjacency learned from k-step reachability, without
the network). Its weakness is the other side of that: it routes only through cells visited in
the replay, so it plans nothing the agent has not explored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from pydantic import Field
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from agentic_rl.algos.base import ActMode
from agentic_rl.algos.hgpo_planner import GraphSchedule


class VisitPlannerConfig(GraphSchedule):
    """``algorithm.visit_planner`` of ``hgpo_sac``: waypoints along visited cells (rebuilt and
    used as ``GraphSchedule`` says)."""

    cell: float = Field(0.5, gt=0, description="side of the grid cells over the achieved-goal "
                        "space (smaller than a wall is thick, so no cell spans one)")
    reach: float | None = Field(None, gt=0, description="route length, in goal-space units, "
                                "from the agent to its waypoint; None: the Manager's goal_scale")


class VisitGraph:
    """Visited cells (nodes, each at the mean achieved goal seen in it) and the steps between
    them (directed edges, as long as the distance between the nodes); empty until ``build``."""

    def __init__(self, cell: float) -> None:
        self.cell = cell
        self.keys = np.zeros((0, 0), dtype=np.int64)  # [M, G] integer cell coordinates
        self.points = torch.zeros(0, 0)  # [M, G] mean achieved goal in each cell
        self.edges = np.zeros((0, 2), dtype=np.int64)  # [E, 2] (from, to) node indices
        self.reverse: csr_matrix | None = None  # [M, M] edge lengths, to -> from

    @property
    def ready(self) -> bool:
        return self.points.shape[0] > 0

    def build(self, achieved: torch.Tensor, next_achieved: torch.Tensor) -> dict[str, float]:
        """Nodes and edges from the transitions ``achieved -> next_achieved [K, G]``."""
        both = torch.cat([achieved, next_achieved]).double().numpy()
        keys, node = np.unique(np.floor(both / self.cell).astype(np.int64), axis=0,
                               return_inverse=True)
        node = node.reshape(-1)
        sums = np.zeros((keys.shape[0], both.shape[1]))
        np.add.at(sums, node, both)
        points = sums / np.bincount(node, minlength=keys.shape[0])[:, None]
        k = achieved.shape[0]
        moves = np.stack([node[:k], node[k:]], axis=1)
        self.edges = np.unique(moves[moves[:, 0] != moves[:, 1]], axis=0)
        self.keys, self.points = keys, torch.as_tensor(points, dtype=torch.float32)
        self._index_edges()
        return {"planner/cells": float(keys.shape[0]),
                "planner/edges_per_cell": float(self.edges.shape[0] / keys.shape[0])}

    def _index_edges(self) -> None:
        m = self.keys.shape[0]
        length = np.linalg.norm(self.points.numpy()[self.edges[:, 1]]
                                - self.points.numpy()[self.edges[:, 0]], axis=1)
        # csgraph reads an explicit 0 as no edge: two nodes at one point still get one
        self.reverse = csr_matrix((np.maximum(length, 1e-9), (self.edges[:, 1], self.edges[:, 0])),
                                  shape=(m, m))

    def nearest(self, points: torch.Tensor) -> np.ndarray:
        """``[N]`` the node of each point's cell where it was visited, else the nearest node."""
        keys = np.floor(points.double().numpy() / self.cell).astype(np.int64)
        same = (keys[:, None, :] == self.keys[None]).all(-1)  # [N, M]
        closest = torch.cdist(points.float(), self.points).argmin(-1).numpy()
        return np.where(same.any(-1), same.argmax(-1), closest)

    def plan(self, achieved: torch.Tensor, goal: torch.Tensor, reach: float,
             reached: Callable[[torch.Tensor, torch.Tensor], bool] | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(waypoint [N, G], routed [N] bool)`` for agents at ``achieved [N, G]`` heading for
        ``goal [N, G]``: the farthest node along the shortest route whose route length from
        the agent is at most ``reach``, or the goal itself once the route's last node is
        within reach (the route ends at the node nearest the goal where the goal's own cell
        was never visited). With ``reached(achieved [G], point [G])`` (the env's success
        test) the waypoint is never one the agent has already reached: the route is followed
        past ``reach`` to its first node that is not (a bent route, or a first hop longer
        than ``reach``, would otherwise give a waypoint that asks for no move). ``routed`` is
        False where no route exists; the waypoint is then the goal."""
        starts, ends = self.nearest(achieved), self.nearest(goal)
        targets, inverse = np.unique(ends, return_inverse=True)
        # shortest routes to each distinct target, searched backwards from it
        distance, predecessor = dijkstra(self.reverse, indices=targets, return_predecessors=True)
        waypoints = goal.clone().float()
        routed = torch.zeros(achieved.shape[0], dtype=torch.bool)
        for i, (start, row) in enumerate(zip(starts, inverse.reshape(-1))):
            if not np.isfinite(distance[row, start]):
                continue
            routed[i] = True
            node, here, travelled = start, achieved[i].float(), 0.0
            while node != targets[row]:
                following = predecessor[row, node]
                travelled += float((self.points[following] - here).norm())
                if travelled > reach and (reached is None or not reached(achieved[i].float(),
                                                                         self.points[node])):
                    break
                node, here = following, self.points[following]
            if node != targets[row]:  # else the whole route is within reach: the goal
                waypoints[i] = self.points[node]
        return waypoints, routed

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"keys": torch.as_tensor(self.keys), "points": self.points,
                "edges": torch.as_tensor(self.edges)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.keys, self.points = state["keys"].numpy(), state["points"]
        self.edges = state["edges"].numpy()
        if self.ready:
            self._index_edges()


class VisitWaypoints:
    """The visit graph in ``hgpo_sac``'s loop, with the interface (and, but for ``config``
    and ``reach``, the arguments) of ``GraphWaypoints``: ``config`` is the
    ``algorithm.visit_planner``, ``reach`` the resolved waypoint distance."""

    def __init__(self, config: VisitPlannerConfig, reach: float,
                 success_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 to_unit: Callable[[torch.Tensor], torch.Tensor], relative: bool) -> None:
        self.config, self.reach = config, reach
        self.graph = VisitGraph(config.cell)
        self.success_fn, self.to_unit, self.relative = success_fn, to_unit, relative
        self.owed = False  # a rebuild fell due (use: eval builds at the next evaluation)
        self.pending: dict[str, float] = {}

    def reached(self, achieved: torch.Tensor, point: torch.Tensor) -> bool:
        """Whether an agent at ``achieved [G]`` has reached ``point [G]`` (the env's test)."""
        return bool(self.success_fn(achieved[None], point[None])[0])

    def plans(self, mode: ActMode) -> bool:
        """Whether the graph chooses this step's new subgoals (``before_act`` has made any
        rebuild owed to this step by then)."""
        if mode == "random" or (mode != "deterministic" and self.config.use == "eval"):
            return False
        return self.graph.ready

    def before_act(self, mode: ActMode, storage: Any, generator: torch.Generator) -> None:
        if self.owed and storage is not None and (mode == "deterministic"
                                                 or self.config.use == "train_and_eval"):
            self.pending, self.owed = self.refresh(storage, generator), False

    def subgoals(self, worker_input: torch.Tensor, obs: dict[str, torch.Tensor],
                 new: torch.Tensor, goal: torch.Tensor, goal_unit: torch.Tensor,
                 hop: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """``(subgoal [N, G], Manager action [N, G], hop)``: a new waypoint at each period's
        start and as soon as the current one is reached; ``hop`` passes through."""
        if not self.graph.ready:
            return goal, goal_unit, hop
        achieved = obs["achieved_goal"].float()
        renew = new | self.success_fn(achieved, goal).bool()
        if not renew.any():
            return goal, goal_unit, hop
        planned, _ = self.graph.plan(achieved[renew], obs["desired_goal"][renew].float(),
                                     self.reach, self.reached)
        goal = goal.clone()
        goal[renew] = planned
        offset = goal - achieved if self.relative else goal
        goal_unit = torch.where(renew[:, None], self.to_unit(offset).clamp(-1.0, 1.0), goal_unit)
        return goal, goal_unit, hop

    def after_worker_update(self, worker_updates: int, storage: Any,
                            generator: torch.Generator) -> dict[str, float]:
        if storage is not None and worker_updates % self.config.refresh_every == 0:
            self.owed = True
        metrics, self.pending = self.pending, {}
        return metrics

    def refresh(self, storage: Any, generator: torch.Generator) -> dict[str, float]:
        """Rebuild from every finished transition in the Worker's replay."""
        rows = storage.replays["worker"].finished_rows(("achieved_goal", "next_achieved_goal"))
        if rows["achieved_goal"].shape[0] == 0:
            return {}
        return self.graph.build(rows["achieved_goal"], rows["next_achieved_goal"])

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**self.graph.state_dict(), "owed": torch.tensor(self.owed)}

    def load_state_dict(self, state: dict[str, torch.Tensor] | None) -> None:
        """``None`` (a checkpoint saved without this planner): rebuild before it next plans."""
        if state is None:
            self.owed = True
            return
        self.graph.load_state_dict(state)
        self.owed = bool(state["owed"])
