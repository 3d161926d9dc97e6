"""A landmark-graph Manager for ``hgpo_sac`` (search on the replay buffer, as SoRB and HIGL).

Landmarks are states the Worker has visited, spread over the achieved-goal space by farthest
point sampling. The Worker's critic says how far apart two of them are: with a sparse 0/1
reward on reaching the goal and termination there, ``Q(s, pi(s, g), g) ~ gamma^(d - 1)`` for
a goal ``d`` steps away, so ``d ~ 1 + log Q / log gamma`` (``steps_from_q`` also reads a
reward of -1 per step and 0 at the goal). Edges no longer than
``max_distance`` steps (the range in which the Worker's estimate is trusted) form a graph;
all-pairs shortest paths over it give, from any state to any goal, the first landmark of the
shortest route, which becomes the Worker's subgoal. A goal within ``max_distance`` is chased
directly. Pure functions first (tested against hand-built graphs), then the graph object the
learner keeps (rebuilt every ``refresh_every`` Worker updates and saved in checkpoints, so a
resumed run plans with the graph the uninterrupted one had).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

# (obs [B, o], goal [B, G]) -> steps to reach the goal [B]
DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class GraphSchedule(BaseModel):
    """When a planner's graph is rebuilt and where it plans (shared by ``planner`` and
    ``visit_planner``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    refresh_every: int = Field(2000, ge=1, description="rebuild the graph every this many "
                               "Worker updates")
    use: Literal["eval", "train_and_eval"] = Field(
        "eval", description="eval: plan in deterministic episodes only (SoRB); train_and_eval: "
        "also choose the training subgoals (the learned Manager's proposals are then unused)")


class PlannerConfig(GraphSchedule):
    """``algorithm.planner`` of ``hgpo_sac``: subgoals from a graph over visited states."""

    landmarks: int = Field(200, ge=2, description="graph nodes, spread by farthest points")
    candidates: int = Field(4000, ge=2, description="Worker replay rows landmarks come from")
    max_distance: float | None = Field(
        None, gt=0, description="longest edge, in env steps as the Worker's critic estimates "
        "them; None: the period (the range the Worker is trained to cover)")
    patience: int | None = Field(None, ge=1, description="steps the Worker gets to reach a "
                                 "landmark; a hop not made by then makes its edge one "
                                 "max_distance longer; None: twice max_distance")

    def resolved(self, period: int) -> "PlannerConfig":
        """This config with the defaults that depend on the Manager's period filled in."""
        max_distance = self.max_distance if self.max_distance is not None else float(period)
        patience = self.patience if self.patience is not None else int(2 * max_distance)
        return self.model_copy(update={"max_distance": max_distance, "patience": patience})


def steps_from_q(q: torch.Tensor, gamma: float, hit: float = 1.0, miss: float = 0.0,
                 floor: float = 1e-4) -> torch.Tensor:
    """Steps to a goal implied by a Worker value ``q`` (any shape), for a reward of ``miss``
    per step and ``hit`` on the step that reaches the goal, where the episode ends:
    ``q = miss / (1 - gamma) + gamma^(d - 1) (hit - miss / (1 - gamma))``, solved for ``d``
    (``gamma^(d - 1)`` clamped to ``[floor, 1]``)."""
    never = miss / (1.0 - gamma)
    reach = ((q - never) / (hit - never)).clamp(floor, 1.0)
    return 1.0 + reach.log() / math.log(gamma)


def farthest_points(points: torch.Tensor, count: int) -> torch.Tensor:
    """Indices ``[min(count, K)]`` of ``points [K, G]`` chosen greedily, each the point farthest
    from those already chosen, starting from point 0."""
    count = min(count, points.shape[0])
    chosen = torch.zeros(count, dtype=torch.long)
    nearest = (points - points[0]).norm(dim=-1)
    for i in range(1, count):
        chosen[i] = int(nearest.argmax())
        nearest = torch.minimum(nearest, (points - points[chosen[i]]).norm(dim=-1))
    return chosen


def shortest_paths(edges: torch.Tensor, max_distance: float,
                   penalty: torch.Tensor | None = None) -> torch.Tensor:
    """``[M, M]`` shortest route lengths (Floyd-Warshall) over the directed graph whose edge
    ``i -> j`` exists where ``edges[i, j]`` is at most ``max_distance`` and is that long plus
    ``penalty[i, j]`` (default 0); ``inf`` where no route exists."""
    cost = edges if penalty is None else edges + penalty
    paths = torch.where(edges <= max_distance, cost, torch.full_like(edges, math.inf))
    paths.fill_diagonal_(0.0)
    for k in range(paths.shape[0]):
        paths = torch.minimum(paths, paths[:, k:k + 1] + paths[k:k + 1, :])
    return paths


def first_landmarks(to_landmark: torch.Tensor, from_landmark: torch.Tensor,
                    paths: torch.Tensor, direct: torch.Tensor, max_distance: float,
                    reached: torch.Tensor | None = None, penalty: torch.Tensor | None = None
                    ) -> torch.Tensor:
    """The first landmark of each env's shortest route to its goal, or -1 to go straight.

    Args:
        to_landmark: ``[N, M]`` steps from each env's state to each landmark.
        from_landmark: ``[N, M]`` steps from each landmark to each env's goal.
        paths: ``[M, M]`` shortest routes between landmarks (``shortest_paths``).
        direct: ``[N]`` steps from each state straight to its goal.
        reached: ``[N, M]`` bool, landmarks each env already stands on (default: those at most
            one step away).
        penalty: ``[N, M]`` added to a first hop that is within reach (failed hops).

    Returns:
        ``[N]`` landmark index; -1 where the goal is within ``max_distance`` or no route
        through the graph exists (both hops are limited to ``max_distance`` like the edges).
        A reached landmark is never the next one, and of routes equally short the one with
        the longer first hop wins (else an agent standing on a landmark would be sent to it
        again).
    """
    inf = torch.full_like(to_landmark, math.inf)
    reached = to_landmark <= 1.0 if reached is None else reached
    cost = to_landmark if penalty is None else to_landmark + penalty
    first_hop = torch.where(~reached & (to_landmark <= max_distance), cost, inf)
    last_hop = torch.where(from_landmark <= max_distance, from_landmark, inf)
    rest = (paths[None] + last_hop[:, None, :]).amin(dim=-1)  # [N, M]: landmark i -> goal
    total = first_hop + rest
    best = (total - 1e-3 * first_hop.nan_to_num(posinf=0.0)).argmin(dim=-1)
    straight = (direct <= max_distance) | torch.isinf(total.gather(1, best[:, None])[:, 0])
    return torch.where(straight, torch.full_like(best, -1), best)


class LandmarkGraph:
    """The landmarks, their edges and shortest routes, and the subgoal choice; empty until
    ``build``."""

    def __init__(self, config: PlannerConfig, distance: DistanceFn,
                 reached: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
                 ) -> None:
        """``reached(achieved [B, G], goal [B, G]) -> [B]`` tells a landmark the agent already
        stands on (the env's success test); None: one at most a step away."""
        self.config, self.distance, self.reached = config, distance, reached
        self.obs = torch.empty(0)  # [M, o] Worker observation at each landmark
        self.goal = torch.empty(0)  # [M, G] achieved goal at each landmark
        self.edges = torch.empty(0)  # [M, M] steps from landmark i to landmark j
        self.paths = torch.empty(0)  # [M, M] shortest routes over edges within max_distance
        self.failures = torch.empty(0)  # [M, M] hops the Worker failed, counted

    @property
    def ready(self) -> bool:
        return self.paths.numel() > 0

    def build(self, obs: torch.Tensor, achieved: torch.Tensor) -> dict[str, float]:
        """Landmarks from candidate rows ``obs [K, o]`` / ``achieved [K, G]``; returns graph
        metrics (edges per node, share of landmark pairs connected)."""
        pick = farthest_points(achieved, self.config.landmarks)
        self.obs, self.goal = obs[pick], achieved[pick]
        m = pick.shape[0]
        self.edges = self.distance(self.obs.repeat_interleave(m, 0),
                                   self.goal.repeat(m, 1)).reshape(m, m)
        self.paths = shortest_paths(self.edges, self.config.max_distance)
        self.failures = torch.zeros(m, m)
        within = (self.edges <= self.config.max_distance).float()
        return {"planner/edges_per_landmark": float(within.sum(1).mean() - 1),
                "planner/connected_pairs": float(torch.isfinite(self.paths).float().mean())}

    def plan(self, obs: torch.Tensor, achieved: torch.Tensor, goal: torch.Tensor,
             current: torch.Tensor | None = None, allow_direct: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(waypoint [N, G], its landmark [N], origin landmark [N])``: the next waypoint
        towards env goals ``goal [N, G]`` (a landmark, or the goal itself with index -1; see
        ``first_landmarks``) and the landmark the hop starts from (the one reached, else the
        landmark nearest to ``achieved``). Where ``allow_direct [N]`` is False the goal is
        approached through the graph even when it looks within reach.

        An env whose ``current [N, G]`` subgoal is a landmark it has reached goes on along
        the route from that landmark, hopping by the graph's own edges (so consecutive
        choices agree with one shortest route); the others search from their state
        ``obs [N, o]`` at ``achieved [N, G]``."""
        n, m = obs.shape[0], self.goal.shape[0]
        to_landmark = self.distance(obs.repeat_interleave(m, 0),
                                    self.goal.repeat(n, 1)).reshape(n, m)
        from_landmark = self.distance(self.obs.repeat(n, 1),
                                      goal.repeat_interleave(m, 0)).reshape(n, m)
        direct = self.distance(obs, goal)
        if allow_direct is not None:
            direct = torch.where(allow_direct, direct, math.inf)
        reached = None if self.reached is None else self.reached(
            achieved.repeat_interleave(m, 0), self.goal.repeat(n, 1)).bool().reshape(n, m)
        on = self.landmark_reached(current, reached, n)
        nearest = torch.cdist(achieved, self.goal).argmin(dim=-1)
        # a hop failed from near a landmark costs more from near it
        penalty = self.failures[nearest] * self.config.max_distance
        if (on >= 0).any():  # [N]: hop from the landmark instead of from the state
            at = on.clamp(min=0)
            hopping = (on >= 0)[:, None]
            to_landmark = torch.where(hopping, self.edges[at], to_landmark)
            penalty = torch.where(hopping, self.failures[at] * self.config.max_distance, penalty)
            own = torch.nn.functional.one_hot(at, m).bool()
            reached = torch.where(hopping, own, to_landmark <= 1.0 if reached is None
                                  else reached)
            direct = torch.where(on >= 0, from_landmark.gather(1, at[:, None])[:, 0], direct)
        index = first_landmarks(to_landmark, from_landmark, self.paths, direct,
                                self.config.max_distance, reached, penalty)
        origin = torch.where(on >= 0, on, nearest)
        return torch.where(index[:, None] >= 0, self.goal[index.clamp(min=0)], goal), index, origin

    def follow(self, obs: torch.Tensor, achieved: torch.Tensor, env_goal: torch.Tensor,
               current: torch.Tensor, hop: torch.Tensor | None, new: torch.Tensor,
               first: torch.Tensor, reached: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step along the routes of ``N`` envs: ``(waypoint [N, G], hop [N, 3])``.

        ``hop`` is each env's origin and target landmark (-1: the env goal) and the steps
        since it set out (None at the first step); ``current [N, G]`` its waypoint and
        ``reached [N]`` whether it is there. An env gets a new waypoint at an episode's
        start (``first [N]``), when it reached its waypoint (it moves on at once), at a new
        period (``new [N]``) when it was heading for the env goal, and after ``patience``
        steps without reaching it: the failed hop then costs more in later routes, and a goal
        it failed to reach straight is approached through the graph. A landmark not yet
        reached stays the waypoint across periods (a search from the state every period made
        routes flip back and forth)."""
        if hop is None:
            hop = torch.tensor([-1, -1, 0]).repeat(achieved.shape[0], 1)
        reached = reached & ~first
        overdue = ~reached & ~first & (hop[:, 2] >= self.config.patience)
        stuck = overdue & (hop[:, 1] >= 0)
        if stuck.any():
            self.record_failures(hop[stuck, 0], hop[stuck, 1])
        renew = first | reached | overdue | (new & (hop[:, 1] < 0))
        goal = current
        if renew.any():
            planned, target, origin = self.plan(obs, achieved, env_goal, current,
                                                allow_direct=~(overdue & (hop[:, 1] < 0)))
            goal = torch.where(renew[:, None], planned, current)
            same = (target == hop[:, 1]) & ~reached & ~first & ~overdue  # still counting
            fresh = torch.stack([origin, target, torch.where(same, hop[:, 2], 0)], dim=-1)
            hop = torch.where(renew[:, None], fresh, hop)
        return goal, hop + torch.tensor([0, 0, 1])

    def record_failures(self, origin: torch.Tensor, target: torch.Tensor) -> None:
        """Hops ``origin[k] -> target[k]`` (``[K]`` landmark indices; pairs with a -1 are
        skipped) the Worker failed to make in ``patience`` steps: typically an edge its critic
        drew through a wall, or a state its policy stalls in. Each failure makes the edge one
        ``max_distance`` longer, so routes go round it where they can; an edge is never
        removed, which could cut the graph at a corridor (measured: removing failed edges
        left the far corner of PointMaze_Large unreachable). A hop from a state near
        ``origin`` pays the same."""
        keep = (origin >= 0) & (target >= 0) & (origin != target)
        if not keep.any():
            return
        self.failures = self.failures.index_put((origin[keep], target[keep]),
                                                torch.ones(int(keep.sum())), accumulate=True)
        self.paths = shortest_paths(self.edges, self.config.max_distance,
                                    self.failures * self.config.max_distance)

    @property
    def failed_hops(self) -> int:
        """Edges with a failed hop since the last build."""
        return int((self.failures > 0).sum())

    def landmark_reached(self, current: torch.Tensor | None, reached: torch.Tensor | None,
                         n: int) -> torch.Tensor:
        """``[n]``: the index of the landmark that is each env's ``current`` subgoal and is
        reached (``reached [n, M]``), else -1."""
        if current is None or reached is None:
            return torch.full((n,), -1)
        is_current = (self.goal[None] == current[:, None]).all(-1) & reached
        index = is_current.float().argmax(dim=-1)
        return torch.where(is_current.any(-1), index, torch.full_like(index, -1))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"obs": self.obs, "goal": self.goal, "edges": self.edges, "paths": self.paths,
                "failures": self.failures}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.obs, self.goal = state["obs"], state["goal"]
        self.edges, self.paths = state["edges"], state["paths"]
        self.failures = state["failures"]
