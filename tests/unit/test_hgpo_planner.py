"""The landmark-graph Manager of hgpo_sac: distances from values, farthest points, shortest
routes and the first waypoint, each against a hand-built case; then a graph that routes
around a wall and the planner inside the learner."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agentic_rl.algos.hgpo_planner import (LandmarkGraph, PlannerConfig, farthest_points,
                                           first_landmarks, shortest_paths, steps_from_q)
from agentic_rl.algos.hgpo_sac import HGPOSAC, HGPOSACConfig
from agentic_rl.config import ConfigError
from agentic_rl.envs.goal import GoalFunctions

INF = math.inf


def test_steps_from_q_inverts_the_discounted_success_value():
    # 0/1 reward: a goal 3 steps away is worth gamma^2
    steps = steps_from_q(torch.tensor([1.0, 0.81, 0.729]), gamma=0.9)
    torch.testing.assert_close(steps, torch.tensor([1.0, 3.0, 4.0]))
    # -1 per step, 0 at the goal: 3 steps away is -(1 + 0.9) = -1.9
    torch.testing.assert_close(steps_from_q(torch.tensor([-1.9]), 0.9, hit=0.0, miss=-1.0),
                               torch.tensor([3.0]))
    # values outside [never, 1] are clamped: above 1 is 1 step, at or below 0 is the floor
    far = 1 + math.log(1e-4) / math.log(0.9)
    torch.testing.assert_close(steps_from_q(torch.tensor([1.5, -0.2]), 0.9),
                               torch.tensor([1.0, far]))


def test_farthest_points_by_hand():
    points = torch.tensor([[0.0], [1.0], [2.0], [10.0]])
    # from 0 the farthest is 10; then 2 is 2 from its nearest chosen point, 1 only 1
    assert farthest_points(points, 3).tolist() == [0, 3, 2]
    assert farthest_points(points, 9).tolist() == [0, 3, 2, 1]  # at most every point


def test_shortest_paths_drop_long_edges_and_chain_short_ones():
    edges = torch.tensor([[0.0, 2.0, 20.0],
                          [9.0, 0.0, 3.0],
                          [30.0, 30.0, 0.0]])
    paths = shortest_paths(edges, max_distance=10.0)
    expected = torch.tensor([[0.0, 2.0, 5.0],  # 0 -> 1 -> 2 beats the 20-step edge
                             [9.0, 0.0, 3.0],
                             [INF, INF, 0.0]])  # 2 has no edge short enough
    torch.testing.assert_close(paths, expected)


def test_first_landmark_of_the_shortest_route_or_straight_to_the_goal():
    paths = torch.tensor([[0.0, 4.0], [4.0, 0.0]])
    to_landmark = torch.tensor([[3.0, 8.0],    # env 0: via 0 costs 3 + 4 + 2 = 9, via 1: 8 + 2
                                [3.0, 8.0],    # env 1: its goal is 6 steps away: straight
                                [20.0, 20.0]])  # env 2: no landmark within reach: straight
    from_landmark = torch.tensor([[9.0, 2.0], [9.0, 2.0], [1.0, 1.0]])
    direct = torch.tensor([30.0, 6.0, 30.0])
    chosen = first_landmarks(to_landmark, from_landmark, paths, direct, max_distance=10.0)
    assert chosen.tolist() == [0, -1, -1]


def wall_distance(obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """Steps between points of the plane (obs is the point itself): 10 per unit, but no
    crossing of the wall x = 0 below y = 2 (shown as a very long distance)."""
    steps = 10 * (obs - goal).norm(dim=-1)
    crosses = (obs[:, 0] * goal[:, 0] < 0) & ((obs[:, 1] < 2) | (goal[:, 1] < 2))
    return torch.where(crosses, torch.full_like(steps, 1e4), steps)


def test_graph_routes_around_a_wall():
    xs, ys = torch.meshgrid(torch.linspace(-1, 1, 4), torch.linspace(0, 3, 7), indexing="ij")
    points = torch.stack([xs.flatten(), ys.flatten()], dim=-1)
    graph = LandmarkGraph(PlannerConfig(landmarks=28, max_distance=7.0), wall_distance)
    assert not graph.ready
    metrics = graph.build(points, points)
    assert graph.ready and metrics["planner/connected_pairs"] == 1.0
    start, goal = torch.tensor([[-0.5, 0.0]]), torch.tensor([[0.5, 0.0]])
    waypoint = graph.plan(start, start, goal)[0][0]
    assert waypoint[0] < 0 and wall_distance(start, waypoint[None])[0] <= 7.0  # same side
    route = [start[0]]
    for _ in range(20):  # following the waypoints reaches the goal, over the wall's end
        route.append(graph.plan(route[-1][None], route[-1][None], goal)[0][0])
        if torch.equal(route[-1], goal[0]):
            break
    assert torch.equal(route[-1], goal[0]) and max(p[1] for p in route) >= 2.0
    near = torch.tensor([[0.45, 0.0]])  # within reach of the goal: straight there
    torch.testing.assert_close(graph.plan(near, near, goal)[0], goal)


SPACES = {"obs": {"observation": 4, "achieved_goal": 2, "desired_goal": 2}, "goal_dim": 2,
          "act_dim": 2, "action_low": -np.ones(2, np.float32),
          "action_high": np.ones(2, np.float32)}


def success(achieved, desired):
    return ((achieved - desired).norm(dim=-1) < 0.5).float()


def planning_algo(use: str, terminates: bool = True) -> HGPOSAC:
    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    cfg = HGPOSACConfig(period=3, goal_scale=2.0, manager=small, worker=small,
                        planner={"landmarks": 4, "max_distance": 7.0, "use": use})
    algo = HGPOSAC(cfg, SPACES, seed=0)
    algo.set_goal_functions(GoalFunctions(success, success, terminates))
    return algo


@pytest.mark.parametrize("use", ["eval", "train_and_eval"])
def test_planner_chooses_subgoals_where_configured_and_is_checkpointed(use):
    algo = planning_algo(use)
    obs = {"observation": torch.randn(2, 4), "achieved_goal": torch.randn(2, 2),
           "desired_goal": torch.randn(2, 2)}
    before = algo.act(obs, None, "deterministic")[2]["goal"]  # no graph yet: the Manager's
    landmarks = torch.tensor([[5.0, 5.0], [5.0, 6.0], [6.0, 5.0], [6.0, 6.0]])
    algo.planning.graph.build(torch.randn(4, 4), landmarks)
    algo.planning.graph.distance = lambda o, g: torch.full((o.shape[0],), 3.0)  # all within reach
    assert torch.equal(algo.act(obs, None, "deterministic")[2]["goal"], obs["desired_goal"])
    assert not torch.equal(before, obs["desired_goal"])
    trained = algo.act(obs, None, "explore")[2]
    assert torch.equal(trained["goal"], obs["desired_goal"]) == (use == "train_and_eval")
    torch.testing.assert_close(trained["goal_unit"].abs().max() <= 1, torch.tensor(True))
    clone = planning_algo(use)
    clone.load_state_dict(algo.state_dict())
    assert torch.equal(clone.planning.graph.paths, algo.planning.graph.paths)
    assert torch.equal(clone.planning.graph.goal, algo.planning.graph.goal)
    assert sorted(clone.planning.graph.goal.tolist()) == sorted(landmarks.tolist())


def test_planner_needs_values_it_can_read_distances_from():
    with pytest.raises(ConfigError, match="continuing_task: false"):
        planning_algo("eval", terminates=False)  # 1 at the goal, forever: no distance


def line_planner(patience: int = 50) -> HGPOSAC:
    """Landmarks at x = 0, 1, 2, 3 on a line, 4 steps per unit (neighbours only are edges
    within 7 steps); the Worker's observation starts with its position."""
    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    cfg = HGPOSACConfig(period=3, goal_scale=4.0, manager=small, worker=small,
                        planner={"landmarks": 4, "max_distance": 7.0, "patience": patience})
    algo = HGPOSAC(cfg, SPACES, seed=0)
    algo.set_goal_functions(GoalFunctions(success, success, True))
    algo.planning.graph.distance = lambda obs, goal: 4 * (obs[:, :2] - goal).norm(dim=-1)
    line = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    algo.planning.graph.build(torch.cat([line, torch.zeros(4, 2)], dim=-1), line)
    return algo


def at(x: float, first: bool = False) -> dict[str, torch.Tensor]:
    position = torch.tensor([[x, 0.0]])
    return {"observation": torch.cat([position, torch.zeros(1, 2)], dim=-1),
            "achieved_goal": position, "desired_goal": torch.tensor([[3.25, 0.0]]),
            "is_first": torch.tensor([first])}


def test_planned_waypoint_is_held_across_periods_and_left_once_reached():
    algo = line_planner()
    _, state, extras = algo.act(at(0.0, first=True), None, "deterministic")
    assert extras["goal"].tolist() == [[1.0, 0.0]]  # landmark 0 is where it stands
    news = []
    for x in (0.1, 0.2, 0.3, 0.4):  # a new period at the 4th step: still heading for x = 1
        _, state, extras = algo.act(at(x), state, "deterministic")
        assert extras["goal"].tolist() == [[1.0, 0.0]]
        news.append(bool(extras["new_goal"][0]))
    assert news == [False, False, True, False]
    _, state, extras = algo.act(at(0.8), state, "deterministic")  # reached: on to x = 2
    assert extras["goal"].tolist() == [[2.0, 0.0]] and not extras["new_goal"][0]
    _, state, extras = algo.act(at(1.9), state, "deterministic")  # goal 5 steps from x = 2
    assert extras["goal"].tolist() == [[3.25, 0.0]]


def test_a_hop_not_made_in_time_costs_more_but_is_never_cut():
    algo = line_planner(patience=4)
    index = {x: int((algo.planning.graph.goal[:, 0] == x).nonzero()) for x in (0.0, 1.0, 3.0)}
    zero, one, three = index[0.0], index[1.0], index[3.0]
    assert algo.planning.graph.paths[zero, three] == 12.0  # three hops of 4 steps
    _, state, extras = algo.act(at(0.0, first=True), None, "deterministic")
    for _ in range(3):  # stalled: the hop 0 -> 1 gets 4 steps
        _, state, extras = algo.act(at(0.1), state, "deterministic")
        assert extras["goal"].tolist() == [[1.0, 0.0]] and algo.planning.graph.failed_hops == 0
    _, state, extras = algo.act(at(0.1), state, "deterministic")
    assert algo.planning.graph.failed_hops == 1 and algo.planning.graph.failures[zero, one] == 1
    # one max_distance more: still a route
    assert algo.planning.graph.paths[zero, three] == 12.0 + 7.0
    assert extras["goal"].tolist() == [[1.0, 0.0]]  # the only way on; its count starts over
    assert state.hop[0].tolist() == [zero, one, 1]
    edges = torch.tensor([[0.0, 4.0, 6.0], [4.0, 0.0, 4.0], [6.0, 4.0, 0.0]])
    penalised = shortest_paths(edges, 7.0, torch.tensor([[0.0, 0.0, 7.0]] + [[0.0] * 3] * 2))
    assert penalised[0, 2] == 8.0  # round the failed edge (6 + 7) through node 1 (4 + 4)


def test_planner_distances_default_to_the_period():
    resolved = PlannerConfig().resolved(period=20)
    assert resolved.max_distance == 20.0 and resolved.patience == 40
    explicit = PlannerConfig(max_distance=7.0, patience=3).resolved(period=20)
    assert explicit.max_distance == 7.0 and explicit.patience == 3
    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    algo = HGPOSAC(HGPOSACConfig(period=5, manager=small, worker=small, planner={}), SPACES)
    assert algo.planning.config.max_distance == 5.0 and algo.planning.config.patience == 10


class FakeWorkerReplay:
    """Stands in for the Worker's replay: random candidate rows for a graph build."""

    def sample(self, count: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return {"obs": torch.randn(8, 4, generator=generator),
                "achieved_goal": 3 * torch.randn(8, 2, generator=generator)}


@pytest.mark.parametrize("use", ["eval", "train_and_eval"])
def test_an_eval_only_graph_is_built_when_evaluation_first_plans(use):
    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    cfg = HGPOSACConfig(period=3, goal_scale=2.0, manager=small, worker=small, planner={
        "landmarks": 4, "max_distance": 7.0, "use": use, "refresh_every": 2})
    algo = HGPOSAC(cfg, SPACES, seed=0)
    algo.set_goal_functions(GoalFunctions(success, success, True))
    algo.storage = SimpleNamespace(replays={"worker": FakeWorkerReplay()})
    batch = {"obs": torch.randn(4, 4), "action": torch.rand(4, 2) * 2 - 1,
             "reward": torch.zeros(4), "next_obs": torch.randn(4, 4), "terminated": torch.zeros(4),
             "desired_goal": torch.randn(4, 2)}
    first = algo.update({"worker": batch})
    second = algo.update({"worker": batch})  # the second Worker update: a rebuild falls due
    assert "planner/connected_pairs" not in first
    built = "planner/connected_pairs" in second
    assert algo.planning.graph.ready == (use == "train_and_eval") == built
    assert algo.planning.owed == (use == "eval")
    resumed = HGPOSAC(cfg, SPACES, seed=0)
    resumed.load_state_dict(algo.state_dict())
    assert resumed.planning.owed == algo.planning.owed
    obs = {"observation": torch.randn(2, 4), "achieved_goal": torch.randn(2, 2),
           "desired_goal": torch.randn(2, 2)}
    algo.act(obs, None, "explore")  # training steps never build it
    assert algo.planning.graph.ready == (use == "train_and_eval")
    algo.act(obs, None, "deterministic")
    assert algo.planning.graph.ready and not algo.planning.owed
    logged = algo.update({"worker": batch})  # the evaluation's build, logged once
    assert ("planner/connected_pairs" in logged) == (use == "eval")
    fourth = algo.update({"worker": batch})  # due again: built here in train_and_eval only
    assert ("planner/connected_pairs" in fourth) == (use == "train_and_eval")
