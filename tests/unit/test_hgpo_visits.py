"""The visit graph of ``hgpo_sac``'s ``visit_planner`` on hand-built walks: cells, edges and
their lengths, routes round a wall it never saw, and the waypoint a route length ahead."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algos.hgpo_visits import VisitGraph


def walk(*corners: tuple[float, float], step: float = 0.25) -> tuple[torch.Tensor, torch.Tensor]:
    """``(achieved, next_achieved) [K, 2]``: straight steps of ``step`` through ``corners``."""
    points = [torch.tensor(corners[0], dtype=torch.float32)]
    for corner in corners[1:]:
        target = torch.tensor(corner, dtype=torch.float32)
        while (target - points[-1]).norm() > 1e-6:
            gap = target - points[-1]
            points.append(points[-1] + gap * min(1.0, step / float(gap.norm())))
    path = torch.stack(points)
    return path[:-1], path[1:]


def u_walk() -> VisitGraph:
    """Out along y = 0.1, up x = 4.1, back along y = 4.1 (a wall fills 0 < x < 3,
    1 < y < 3: no step crosses it), and the way back."""
    there = walk((0.1, 0.1), (4.1, 0.1), (4.1, 4.1), (0.1, 4.1))
    graph = VisitGraph(cell=0.5)
    graph.build(torch.cat([there[0], there[1].flip(0)]), torch.cat([there[1], there[0].flip(0)]))
    return graph


def test_cells_sit_at_their_visits_mean_and_edges_are_the_steps_between_cells():
    graph = VisitGraph(cell=0.5)
    metrics = graph.build(torch.tensor([[0.1, 0.1], [0.3, 0.1], [0.6, 0.1]]),
                          torch.tensor([[0.3, 0.1], [0.6, 0.1], [1.1, 0.1]]))
    # cells (0, 0): visits 0.1, 0.3, 0.3; (1, 0): 0.6, 0.6; (2, 0): 1.1
    assert graph.keys.tolist() == [[0, 0], [1, 0], [2, 0]]
    assert graph.points[:, 0].tolist() == pytest.approx([0.7 / 3, 0.6, 1.1])
    assert graph.edges.tolist() == [[0, 1], [1, 2]]  # the step within cell (0, 0) is no edge
    assert metrics == {"planner/cells": 3.0, "planner/edges_per_cell": pytest.approx(2 / 3)}
    # directed: from the last cell there is no way back
    waypoint, routed = graph.plan(torch.tensor([[1.1, 0.1]]), torch.tensor([[0.1, 0.1]]), 5.0)
    assert not routed[0] and waypoint[0].tolist() == pytest.approx([0.1, 0.1])


def test_the_route_goes_round_the_wall_and_the_waypoint_lies_reach_ahead_on_it():
    graph = u_walk()
    start, goal = torch.tensor([[0.1, 0.1]]), torch.tensor([[0.1, 4.1]])
    waypoint, routed = graph.plan(start, goal, reach=2.0)
    assert routed[0]
    # 2 units along the bottom corridor (cells every 0.5: the last within 2 units), not up
    # through the wall where the goal is
    assert waypoint[0, 1] == pytest.approx(0.1) and 1.5 <= waypoint[0, 0] <= 2.1
    # from the right-hand corridor the route goes up it
    waypoint, _ = graph.plan(torch.tensor([[4.1, 1.0]]), goal, reach=2.0)
    assert waypoint[0, 0] == pytest.approx(4.1) and 2.5 <= waypoint[0, 1] <= 3.1


def test_the_goal_itself_once_the_route_to_it_is_within_reach():
    graph = u_walk()
    goal = torch.tensor([[0.1, 4.1], [0.3, 0.1]])
    waypoint, routed = graph.plan(torch.tensor([[1.0, 4.1], [0.1, 0.1]]), goal, reach=2.0)
    assert routed.all() and torch.equal(waypoint, goal)


def test_a_goal_beyond_every_visit_is_approached_through_the_nearest_visited_cell():
    graph = u_walk()
    goal = torch.tensor([[-3.0, 4.1]])  # never visited: nearest cell is (0, 8) at x ~ 0.2
    waypoint, routed = graph.plan(torch.tensor([[4.1, 3.9]]), goal, reach=2.0)
    assert routed[0] and waypoint[0, 1] == pytest.approx(4.1) and waypoint[0, 0] < 4.1
    waypoint, _ = graph.plan(torch.tensor([[0.2, 4.1]]), goal, reach=2.0)
    assert torch.equal(waypoint, goal)  # at the route's end: straight on


def test_the_graph_survives_its_state_dict():
    graph = u_walk()
    copy = VisitGraph(cell=0.5)
    copy.load_state_dict(graph.state_dict())
    start, goal = torch.tensor([[0.1, 0.1]]), torch.tensor([[0.1, 4.1]])
    assert torch.equal(copy.plan(start, goal, 2.0)[0], graph.plan(start, goal, 2.0)[0])


class WalkReplay:
    """Stands in for the Worker's replay: the U walk as its finished transitions."""

    def finished_rows(self, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        achieved, after = walk((0.1, 0.1), (4.1, 0.1), (4.1, 4.1), (0.1, 4.1))
        return dict(zip(fields, (achieved, after)))


def visiting_algo(use: str, **planner):
    from types import SimpleNamespace

    from agentic_rl.algos.hgpo_sac import HGPOSAC, HGPOSACConfig
    from agentic_rl.envs.goal import GoalFunctions
    from tests.unit.test_hgpo_planner import SPACES, success

    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    cfg = HGPOSACConfig(period=3, goal_scale=2.0, subgoals="relative",
                        worker_goal_input="relative", worker_reward="distance", manager=small,
                        worker=small, visit_planner={"use": use, "refresh_every": 1, **planner})
    algo = HGPOSAC(cfg, SPACES, seed=0)
    algo.set_goal_functions(GoalFunctions(success, success, True))
    algo.storage = SimpleNamespace(replays={"worker": WalkReplay()})
    return algo


def at(x: float, y: float) -> dict[str, torch.Tensor]:
    return {"observation": torch.zeros(1, 4), "achieved_goal": torch.tensor([[x, y]]),
            "desired_goal": torch.tensor([[0.1, 4.1]])}


@pytest.mark.parametrize("use", ["eval", "train_and_eval"])
def test_the_learner_follows_the_visits_where_configured_and_rebuilds_when_due(use):
    algo = visiting_algo(use)
    batch = {"obs": torch.randn(4, 4), "action": torch.rand(4, 2) * 2 - 1,
             "reward": torch.zeros(4), "next_obs": torch.randn(4, 4), "terminated": torch.zeros(4),
             "desired_goal": torch.randn(4, 2), "achieved_goal": torch.randn(4, 2),
             "next_achieved_goal": torch.randn(4, 2)}
    assert "planner/cells" not in algo.update({"worker": batch})  # due: built when it plans
    assert algo.planning.owed and not algo.planning.graph.ready
    trained = algo.act(at(0.1, 0.1), None, "explore")[2]
    assert algo.planning.graph.ready == (use == "train_and_eval")
    on_route = trained["goal"][0, 1] == pytest.approx(0.1) and trained["goal"][0, 0] > 1.5
    assert on_route == (use == "train_and_eval")
    evaluated = algo.act(at(0.1, 0.1), None, "deterministic")[2]
    assert evaluated["goal"][0, 1] == pytest.approx(0.1) and evaluated["goal"][0, 0] > 1.5
    # the Manager's stored action is the waypoint's offset in its units
    torch.testing.assert_close(evaluated["goal_unit"], (evaluated["goal"] - at(0.1, 0.1)[
        "achieved_goal"]) / 2.0)
    assert algo.update({"worker": batch})["planner/cells"] > 0  # the build, logged once


def test_a_reached_waypoint_is_replaced_at_once_and_an_unreached_one_is_held():
    algo = visiting_algo("eval")
    algo.planning.before_act("deterministic", algo.storage, None)
    algo.planning.owed = True
    _, state, first = algo.act(at(0.1, 0.1), None, "deterministic")
    _, state, held = algo.act(at(0.6, 0.1), state, "deterministic")  # mid-period, not there
    assert torch.equal(held["goal"], first["goal"]) and not held["new_goal"][0]
    there = first["goal"][0].tolist()
    _, _, moved = algo.act(at(*there), state, "deterministic")
    assert moved["goal"][0, 0] > first["goal"][0, 0]  # the next stretch, within the period


def test_the_graph_is_checkpointed_and_rebuilt_where_a_checkpoint_has_none():
    algo = visiting_algo("eval")
    algo.act(at(0.1, 0.1), None, "deterministic")  # nothing owed yet: the Manager's subgoal
    assert not algo.planning.graph.ready
    algo.planning.owed = True
    algo.act(at(0.1, 0.1), None, "deterministic")
    clone = visiting_algo("eval")
    clone.load_state_dict(algo.state_dict())
    assert torch.equal(clone.planning.graph.points, algo.planning.graph.points)
    older = {k: v for k, v in algo.state_dict().items() if k != "planner"}
    fresh = visiting_algo("eval")
    fresh.load_state_dict(older)  # e.g. a run trained without the planner, evaluated with it
    assert fresh.planning.owed
    goal = fresh.act(at(0.1, 0.1), None, "deterministic")[2]["goal"]
    assert fresh.planning.graph.ready and goal[0, 0] > 1.5


def test_one_planner_at_a_time():
    from pydantic import ValidationError

    from agentic_rl.algos.hgpo_sac import HGPOSACConfig

    with pytest.raises(ValidationError, match="keep one"):
        HGPOSACConfig(planner={}, visit_planner={})


def test_a_waypoint_is_never_one_the_agent_has_already_reached():
    graph = u_walk()
    start, goal = torch.tensor([[0.1, 0.1]]), torch.tensor([[0.1, 4.1]])

    def within(achieved, point):  # a success radius of 0.45, as the mazes'
        return bool((achieved - point).norm() <= 0.45)

    # a reach shorter than the first hop: the waypoint is the agent's own cell, already reached
    waypoint, _ = graph.plan(start, goal, reach=0.3)
    assert within(start[0], waypoint[0])
    # with the success test the route is followed to its first node out of reach of it
    waypoint, _ = graph.plan(start, goal, reach=0.3, reached=within)
    assert not within(start[0], waypoint[0])
    assert waypoint[0, 1] == pytest.approx(0.1) and waypoint[0, 0] < 1.0  # the next cells only
    # a waypoint already out of reach of the agent is unchanged by it
    far, _ = graph.plan(start, goal, reach=2.0)
    assert torch.equal(far, graph.plan(start, goal, reach=2.0, reached=within)[0])
