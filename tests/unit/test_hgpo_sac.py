"""HGPO with SAC levels: subgoal periods, Manager transitions, hindsight subgoals, Worker
rewards against the subgoal, maze goal functions (the CLI run: tests/smoke/test_hgpo_sac_cli.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentic_rl.algos.hgpo_losses import relative_goal_inputs
from agentic_rl.algos.hgpo_sac import HGPOSAC, HGPOSACConfig, hindsight_subgoals
from agentic_rl.envs.goal import GoalFunctions, goal_functions
from agentic_rl.envs.make import make_env
from agentic_rl.data.period_storage import PeriodRecorder
from agentic_rl.data.storage import StorageSpec

torch.set_num_threads(1)

SPACES = {"obs": {"observation": 4, "achieved_goal": 2, "desired_goal": 2}, "goal_dim": 2,
          "act_dim": 2, "action_low": -np.ones(2, np.float32),
          "action_high": np.ones(2, np.float32)}


def make_algo(**overrides) -> HGPOSAC:
    small = {"hidden_sizes": [8, 8], "batch_size": 4}
    cfg = HGPOSACConfig(**{"period": 3, "goal_scale": 2.0, "manager": small, "worker": small,
                           **overrides})
    return HGPOSAC(cfg, SPACES, seed=0)


def obs_of(n: int, first=None) -> dict[str, torch.Tensor]:
    obs = {"observation": torch.randn(n, 4), "achieved_goal": torch.randn(n, 2),
           "desired_goal": torch.randn(n, 2)}
    if first is not None:
        obs["is_first"] = torch.tensor(first)
    return obs


def test_subgoals_change_exactly_every_period_and_at_episode_start():
    algo = make_algo()
    state, goals, news = None, [], []
    firsts = [[True, True], [False, False], [False, False], [False, False], [False, True],
              [False, False], [False, False]]
    for first in firsts:
        _, state, extras = algo.act(obs_of(2, first), state)
        goals.append(extras["goal"])
        news.append(extras["new_goal"].tolist())
    # env 0: new at steps 0, 3, 6 (period 3); env 1: 0, 3, then 4 (episode start), 7 would be next
    assert news == [[True, True], [False, False], [False, False], [True, True], [False, True],
                    [False, False], [True, False]]
    for t in range(1, len(goals)):
        for env in range(2):
            same = torch.equal(goals[t][env], goals[t - 1][env])
            assert same != news[t][env]
    assert all((g.abs() <= 2.0).all() for g in goals)  # subgoals stay in the goal_scale box
    torch.testing.assert_close(extras["goal"], algo.manager.unit_to_env(extras["goal_unit"]))


def test_uniform_phase_and_deterministic_acting():
    algo = make_algo()
    obs = obs_of(3)
    action, _, extras = algo.act(obs, None, "random")
    assert action.shape == (3, 2) and (extras["unit_action"].abs() <= 1).all()
    first = algo.act(obs, None, "deterministic")
    second = algo.act(obs, None, "deterministic")
    torch.testing.assert_close(first[0], second[0])
    torch.testing.assert_close(first[2]["goal"], second[2]["goal"])


def test_hindsight_subgoals_swap_rows_with_the_given_probability():
    action = torch.zeros(6, 2)
    achieved = torch.tensor([[0.5, -0.5], [2.0, -3.0]] * 3)
    none, swapped = hindsight_subgoals(action, achieved, 0.0, torch.Generator())
    assert torch.equal(none, action) and not swapped.any()
    every, _ = hindsight_subgoals(action, achieved, 1.0, torch.Generator())
    torch.testing.assert_close(every, achieved.clamp(-1, 1))  # clamped into the action box
    generator = torch.Generator().manual_seed(3)
    swap = torch.rand(6, generator=torch.Generator().manual_seed(3)) < 0.5
    half, swapped = hindsight_subgoals(action, achieved, 0.5, generator)
    torch.testing.assert_close(half, torch.where(swap[:, None], achieved.clamp(-1, 1), action))
    assert torch.equal(swapped, swap)


def test_missed_tested_subgoals_are_penalised_unless_replaced_by_hindsight():
    from agentic_rl.algos.hgpo_sac import penalise_missed

    batch = {"missed": torch.tensor([1.0, 1.0, 0.0, 0.0]), "reward": torch.tensor([0., -1, 0, -1]),
             "terminated": torch.tensor([0.0, 0.0, 1.0, 0.0])}
    kept = torch.tensor([True, False, True, True])  # row 1's subgoal became the one reached
    out = penalise_missed(batch, kept, -10.0)
    assert out["reward"].tolist() == [-10.0, -1.0, 0.0, -1.0]
    assert out["terminated"].tolist() == [1.0, 0.0, 1.0, 0.0]


def test_tested_subgoals_are_pursued_without_noise_and_missed_ones_recorded():
    algo = make_algo(subgoal_testing=1.0)
    obs = obs_of(2, [True, True])
    _, _, extras = algo.act(obs, None, "explore")
    assert extras["testing"].all()
    _, _, quiet = algo.worker.act(algo.worker_obs(obs, extras["goal"]), None, "deterministic")
    torch.testing.assert_close(extras["unit_action"], quiet["unit_action"])  # no noise
    assert not algo.act(obs, None, "deterministic")[2]["testing"].any()
    recorder = PeriodRecorder(2)
    goal = torch.zeros(2, 2)
    for t in range(3):  # one period of 3 steps; env 0 reaches its subgoal at t = 1
        fields = step_fields(t)
        extras = {"new_goal": torch.tensor([t == 0] * 2), "period_end": torch.tensor([t == 2] * 2),
                  "goal_unit": goal, "testing": torch.tensor([True, True])}
        ended = recorder.step(fields["obs"], fields["obs"] + 1, fields, extras,
                              torch.tensor([t == 2] * 2), torch.tensor([t == 1, False]))
    assert [episode["missed"].tolist() for _, episode in ended] == [[0.0], [1.0]]


def test_subgoal_testing_with_an_undiscounted_manager_needs_a_penalty():
    with pytest.raises(ValueError, match="subgoal_penalty"):
        HGPOSACConfig(subgoal_testing=0.3, manager={"gamma": 1.0})
    assert HGPOSACConfig(subgoal_testing=0.3, manager={"gamma": 1.0}, subgoal_penalty=-20.0)
    assert make_algo(subgoal_testing=0.5).subgoal_penalty == pytest.approx(-1 / (1 - 0.95))


def step_fields(t: int, n: int = 2) -> dict[str, torch.Tensor]:
    return {"obs": torch.full((n, 1), float(t)), "achieved_goal": torch.full((n, 2), float(t)),
            "desired_goal": torch.full((n, 2), 9.0), "reward": torch.tensor([1.0, 10.0]) * t,
            "next_obs": torch.full((n, 1), t + 1.0),
            "next_achieved_goal": torch.full((n, 2), t + 1.0), "terminated": torch.zeros(n)}


def test_period_recorder_builds_manager_transitions_by_hand():
    """Two envs, period 2; env 1's episode ends after step 2 (3 steps), env 0's after step 3."""
    recorder = PeriodRecorder(2)
    new = [[True, True], [False, False], [True, True], [False, True]]
    period_end = [[False, False], [True, True], [False, False], [True, False]]
    episode_end = [[False, False], [False, False], [False, True], [True, False]]
    ended = []
    for t in range(4):
        fields = step_fields(t)
        extras = {"new_goal": torch.tensor(new[t]), "goal_unit": torch.full((2, 2), 0.1 * t),
                  "period_end": torch.tensor(period_end[t])}
        ended += recorder.step(fields["obs"], fields["next_obs"], fields, extras,
                               torch.tensor(episode_end[t]))
    (env_a, first), (env_b, second) = ended
    assert (env_a, env_b) == (1, 0)
    # env 1: periods [0, 1] and [2] (cut by the episode end); rewards 10 * (0 + 1) and 10 * 2
    torch.testing.assert_close(first["reward"], torch.tensor([10.0, 20.0]))
    torch.testing.assert_close(first["obs"][:, 0], torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(first["next_obs"][:, 0], torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(first["action"][:, 0], torch.tensor([0.0, 0.2]))
    torch.testing.assert_close(first["next_achieved_goal"][:, 0], torch.tensor([2.0, 3.0]))
    # env 0: periods [0, 1] and [2, 3]; rewards 0 + 1 and 2 + 3
    torch.testing.assert_close(second["reward"], torch.tensor([1.0, 5.0]))
    torch.testing.assert_close(second["obs"][:, 0], torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(second["next_obs"][:, 0], torch.tensor([2.0, 4.0]))
    assert second["desired_goal"].shape == (2, 2) and (second["desired_goal"] == 9).all()


def test_worker_rewarded_and_terminated_against_its_subgoal():
    algo = make_algo()
    fns = GoalFunctions(lambda a, d: -(a - d).norm(dim=-1),
                        lambda a, d: ((a - d).norm(dim=-1) < 0.5).float(), True)
    transition = {"obs": torch.zeros(2, 4), "achieved_goal": torch.zeros(2, 2),
                  "desired_goal": torch.full((2, 2), 7.0), "next_obs": torch.ones(2, 4),
                  "next_achieved_goal": torch.tensor([[1.0, 0.0], [0.0, 3.0]]),
                  "reward": torch.zeros(2), "terminated": torch.zeros(2)}
    extras = {"goal": torch.tensor([[1.0, 0.2], [0.0, 0.0]]), "unit_action": torch.zeros(2, 2)}
    algo.set_goal_functions(fns)
    row, manager_now, manager_next = algo.rows(transition, extras)
    torch.testing.assert_close(row["reward"], torch.tensor([-0.2, -3.0]))
    torch.testing.assert_close(row["terminated"], torch.tensor([1.0, 0.0]))
    assert torch.equal(row["desired_goal"], extras["goal"])  # the subgoal, not the env goal
    assert torch.equal(manager_now, transition["obs"]) and torch.equal(manager_next,
                                                                        transition["next_obs"])


def test_distance_worker_reward_in_rows_and_in_the_workers_hindsight_only():
    sparse = GoalFunctions(lambda a, d: ((a - d).norm(dim=-1) < 0.5).float() - 1.0,
                           lambda a, d: ((a - d).norm(dim=-1) < 0.5).float(), True)
    algo = make_algo(worker_reward="distance")
    algo.set_goal_functions(sparse)
    transition = {"obs": torch.zeros(2, 4), "achieved_goal": torch.zeros(2, 2),
                  "desired_goal": torch.full((2, 2), 7.0), "next_obs": torch.ones(2, 4),
                  "next_achieved_goal": torch.tensor([[3.0, 4.0], [0.0, 0.3]]),
                  "reward": torch.zeros(2), "terminated": torch.zeros(2)}
    extras = {"goal": torch.zeros(2, 2), "unit_action": torch.zeros(2, 2)}
    row, _, _ = algo.rows(transition, extras)
    torch.testing.assert_close(row["reward"], torch.tensor([-5.0, -0.3]))  # -||s' - g||
    torch.testing.assert_close(row["terminated"], torch.tensor([0.0, 1.0]))  # the env's test
    storage = algo.make_storage(StorageSpec(1, 100, 10, 0, sparse, 0))
    achieved, goal = torch.tensor([[3.0, 4.0]]), torch.zeros(1, 2)
    assert storage.her["worker"]["reward_fn"](achieved, goal).item() == pytest.approx(-5.0)
    assert storage.her["manager"]["reward_fn"](achieved, goal).item() == -1.0


def test_the_planner_needs_the_envs_worker_reward():
    with pytest.raises(ValueError, match="worker_reward"):
        HGPOSACConfig(worker_reward="distance", planner={"landmarks": 8})


def test_maze_goal_functions_match_the_env():
    env = make_env("agentic_rl/PointMaze_UMaze-v3", {"continuing_task": False})
    fns = goal_functions(env)
    assert fns.terminates_on_success
    achieved = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.3, 0.3]])
    desired = torch.tensor([[0.3, 0.0], [2.0, 2.0], [0.0, 0.0]])
    expected = env.unwrapped.compute_reward(achieved.numpy(), desired.numpy(), {})
    torch.testing.assert_close(fns.reward_fn(achieved, desired), torch.as_tensor(expected).float())
    torch.testing.assert_close(fns.success_fn(achieved, desired), torch.tensor([1.0, 0.0, 1.0]))
    assert not goal_functions(make_env("agentic_rl/PointMaze_UMaze-v3",
                                       {"continuing_task": True})).terminates_on_success


def test_update_returns_metrics_per_level_and_state_round_trips():
    algo = make_algo()
    batch = {"obs": torch.randn(4, 4), "action": torch.rand(4, 2) * 2 - 1,
             "reward": torch.zeros(4), "next_obs": torch.randn(4, 4), "terminated": torch.zeros(4),
             "desired_goal": torch.randn(4, 2), "next_achieved_goal": torch.randn(4, 2)}
    metrics = algo.update({"worker": batch, "manager": batch})
    assert {"losses/worker_critic_loss", "losses/manager_critic_loss"} <= set(metrics)
    assert all(math.isfinite(v) for v in metrics.values())
    clone = make_algo()
    clone.load_state_dict(algo.state_dict())
    obs = obs_of(2)
    torch.testing.assert_close(clone.act(obs, None, "deterministic")[0],
                               algo.act(obs, None, "deterministic")[0])


def test_relative_subgoals_are_offsets_from_where_the_period_starts():
    algo = make_algo(subgoals="relative")
    obs = obs_of(2, [True, True])
    _, state, extras = algo.act(obs, None)
    offset = algo.manager.unit_to_env(extras["goal_unit"])
    torch.testing.assert_close(extras["goal"], obs["achieved_goal"] + offset)
    moved = {**obs_of(2, [False, False])}
    _, _, later = algo.act(moved, state)  # within the period the target point stays put
    torch.testing.assert_close(later["goal"], extras["goal"])


def test_relative_hindsight_subgoal_is_the_offset_travelled():
    algo = make_algo(subgoals="relative", hindsight_actions=1.0)
    seen = {}
    algo.manager.update = lambda batch: seen.update(batch) or {}
    start, end = torch.tensor([[0.5, -0.5]]), torch.tensor([[1.5, 0.5]])
    batch = {"action": torch.zeros(1, 2), "achieved_goal": start, "next_achieved_goal": end}
    algo.update({"manager": batch})
    # travelled (1, 1) in a box of half-width goal_scale = 2: (0.5, 0.5) in the Manager's units
    torch.testing.assert_close(seen["action"], torch.tensor([[0.5, 0.5]]))


def test_relative_goal_inputs_by_hand():
    batch = {"obs": torch.tensor([[1.0, 2.0]]), "next_obs": torch.tensor([[3.0, 4.0]]),
             "desired_goal": torch.tensor([[5.0, 5.0]]),
             "achieved_goal": torch.tensor([[1.0, 0.0]]),
             "next_achieved_goal": torch.tensor([[2.0, 6.0]]), "reward": torch.tensor([-1.0])}
    out = relative_goal_inputs(batch)
    torch.testing.assert_close(out["obs"], torch.tensor([[1.0, 2.0, 4.0, 5.0]]))
    torch.testing.assert_close(out["next_obs"], torch.tensor([[3.0, 4.0, 3.0, -1.0]]))
    assert "desired_goal" not in out and torch.equal(out["reward"], batch["reward"])


def test_relative_worker_acts_the_same_wherever_the_same_offset_is():
    shift = torch.tensor([[3.0, -2.0], [0.5, 4.0]])
    obs = obs_of(2, [True, True])
    moved = {**obs, "achieved_goal": obs["achieved_goal"] + shift}
    for goal_input, invariant in (("relative", True), ("absolute", False)):
        algo = make_algo(subgoals="relative", worker_goal_input=goal_input)
        here, _, extras = algo.act(obs, None, "deterministic")
        there, _, moved_extras = algo.act(moved, None, "deterministic")
        torch.testing.assert_close(moved_extras["goal"], extras["goal"] + shift)
        assert torch.allclose(here, there) == invariant


def test_relative_worker_learns_from_absolute_replay_rows():
    algo = make_algo(worker_goal_input="relative", worker_reward="distance")
    fns = GoalFunctions(lambda a, d: -(a - d).norm(dim=-1),
                        lambda a, d: ((a - d).norm(dim=-1) < 0.5).float(), True)
    storage = algo.make_storage(StorageSpec(1, 100, 10, 0, fns, 0))
    assert storage.replays["worker"].storage["obs"].shape[-1] == 4  # stored as the env gave it
    assert algo.worker.obs_normalizer.mean.shape[0] == 6 and not algo.worker.goal_conditioned
    steps = {"obs": torch.randn(3, 4), "next_obs": torch.randn(3, 4),
             "achieved_goal": torch.randn(3, 2), "next_achieved_goal": torch.randn(3, 2),
             "desired_goal": torch.full((3, 2), 2.0)}
    algo.worker.observe = lambda states: seen.update(states)
    seen: dict = {}
    algo.manager.observe = lambda states: None
    algo.observe({"worker": steps, "manager": steps})
    final_offset = 2.0 - steps["next_achieved_goal"][-1]
    torch.testing.assert_close(seen["observation"][-1], torch.cat([steps["next_obs"][-1],
                                                                  final_offset]))
    assert seen["observation"].shape == (4, 6)
    batch = {**steps, "action": torch.rand(3, 2) * 2 - 1, "reward": torch.zeros(3),
             "terminated": torch.zeros(3)}
    metrics = make_algo(worker_goal_input="relative").update({"worker": batch})
    assert math.isfinite(metrics["losses/worker_critic_loss"])


def test_the_planner_needs_absolute_worker_goals():
    with pytest.raises(ValueError, match="worker_goal_input"):
        HGPOSACConfig(worker_goal_input="relative", planner={"landmarks": 8})


def test_subgoal_stats_by_hand():
    from agentic_rl.algos.hgpo_diagnostics import SubgoalStats

    def success(achieved, goal):
        return ((achieved - goal).norm(dim=-1) <= 0.1).float()

    stats = SubgoalStats(success)
    path = [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]
    goals = [([1.0, 0.05], [0.5, 0.99]), ([1.0, 0.05], [0.5, 0.99]),  # reached at step 1
             ([3.0, 4.0], [1.0, -1.0]), ([3.0, 4.0], [1.0, -1.0])]    # 4 from the path's end
    before = [[0.0, 0.0], *path[:-1]]
    for t, (goal, unit) in enumerate(goals):
        stats.step({"new_goal": torch.tensor([t % 2 == 0]), "goal": torch.tensor([goal]),
                    "goal_unit": torch.tensor([unit])}, torch.tensor([before[t]]),
                   torch.tensor([path[t]]))
    stats.end_episode()
    metrics = stats.metrics()
    assert metrics["subgoal_reached_rate"] == 0.5
    assert metrics["subgoal_saturation"] == pytest.approx((0.5 + 1.0) / 2)
    assert metrics["subgoal_path_distance"] == pytest.approx((0.05 + 4.0) / 2)
    # set at (0, 0) and at (1, 0): 1.00125 and 4.47214 away
    assert metrics["subgoal_distance"] == pytest.approx((math.hypot(1.0, 0.05)
                                                         + math.hypot(2.0, 4.0)) / 2)
    assert math.isnan(SubgoalStats(success).metrics()["subgoal_reached_rate"])


@pytest.mark.parametrize("bad", [{"period": 0}, {"goal_scale": -1.0}, {"worker": {"lr": 1}},
                                 {"subgoals": "sideways"}])
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        HGPOSACConfig(**bad)


def test_a_failed_step_is_absorbing_for_the_worker():
    from agentic_rl.algos.hgpo_losses import failure_outcome

    reward, terminated = failure_outcome(torch.tensor([-2.0, -2.0, 0.0]),
                                         torch.tensor([0.0, 1.0, 1.0]),
                                         torch.tensor([1.0, 0.0, 0.0]), gamma=0.9, cost=1.0)
    # -2 - 1 forever at gamma 0.9 is -30; the others keep their reward and termination
    torch.testing.assert_close(reward, torch.tensor([-30.0, -2.0, 0.0]))
    torch.testing.assert_close(terminated, torch.tensor([1.0, 1.0, 1.0]))


def test_worker_rows_mark_env_failures_and_the_update_makes_them_absorbing():
    def success(a, d):
        return ((a - d).norm(dim=-1) < 0.5).float()

    failing = GoalFunctions(lambda a, d: success(a, d) - 1.0, success, True, True)
    algo = make_algo(worker_reward="distance")
    storage = algo.make_storage(StorageSpec(2, 100, 10, 0, failing, 0))
    assert "failed" in storage.replays["worker"].fields
    assert "failed" not in storage.replays["manager"].fields
    transition = {"obs": torch.zeros(2, 4), "achieved_goal": torch.zeros(2, 2),
                  "desired_goal": torch.tensor([[7.0, 7.0], [0.0, 0.3]]),
                  "next_obs": torch.ones(2, 4),
                  "next_achieved_goal": torch.tensor([[3.0, 4.0], [0.0, 0.3]]),
                  "reward": torch.zeros(2), "terminated": torch.ones(2)}  # env 1: success
    extras = {"goal": torch.zeros(2, 2), "unit_action": torch.zeros(2, 2)}
    row, _, _ = algo.rows(transition, extras)
    torch.testing.assert_close(row["failed"], torch.tensor([1.0, 0.0]))
    seen = {}
    algo.worker.update = lambda batch: seen.update(batch) or {}
    batch = {"obs": torch.zeros(2, 4), "action": torch.zeros(2, 2), "reward": row["reward"],
             "next_obs": torch.ones(2, 4), "terminated": row["terminated"],
             "desired_goal": row["desired_goal"], "achieved_goal": row["achieved_goal"],
             "next_achieved_goal": row["next_achieved_goal"], "failed": row["failed"]}
    algo.update({"worker": batch})
    # the failed row: -5 less the default cost 1, forever at the Worker's gamma 0.95,
    # terminal; the other unchanged
    torch.testing.assert_close(seen["reward"], torch.tensor([-6.0 / 0.05, -0.3]))
    torch.testing.assert_close(seen["terminated"], torch.tensor([1.0, 1.0]))
    assert "failed" not in seen and "failed" in batch  # the sampled batch is left as it was
    plain = make_algo().make_storage(StorageSpec(1, 100, 10, 0, GoalFunctions(
        failing.reward_fn, success, True), 0))
    assert "failed" not in plain.replays["worker"].fields  # checkpoints keep their format


def test_the_workers_action_cost_by_hand_and_in_its_update():
    from agentic_rl.algos.hgpo_losses import action_cost

    action = torch.tensor([[1.0, 0.0], [0.5, -0.5]])
    torch.testing.assert_close(action_cost(action, 0.1), torch.tensor([0.1, 0.05]))
    algo = make_algo(worker_action_cost=0.1)
    seen = {}
    algo.worker.update = lambda batch: seen.update(batch) or {}
    batch = {"obs": torch.zeros(2, 4), "action": action, "reward": torch.tensor([-1.0, 0.0]),
             "next_obs": torch.ones(2, 4), "terminated": torch.zeros(2),
             "desired_goal": torch.zeros(2, 2), "next_achieved_goal": torch.zeros(2, 2)}
    algo.update({"worker": batch})
    torch.testing.assert_close(seen["reward"], torch.tensor([-1.1, -0.05]))
    torch.testing.assert_close(batch["reward"], torch.tensor([-1.0, 0.0]))  # not in place


def test_a_failure_cost_without_failures_is_an_error():
    from agentic_rl.config import ConfigError

    def success(a, d):
        return ((a - d).norm(dim=-1) < 0.5).float()

    algo = make_algo(worker_failure_cost=2.0)
    with pytest.raises(ConfigError, match="worker_failure_cost"):
        algo.set_goal_functions(GoalFunctions(success, success, True))
    algo.set_goal_functions(GoalFunctions(success, success, True, True))  # read: fine


def test_the_workers_action_bound_shrinks_its_box():
    algo = make_algo(worker_action_bound=0.2)
    action, _, extras = algo.act(obs_of(64, [True] * 64), None, "random")
    assert action.abs().max() <= 0.2 + 1e-6 and action.abs().max() > 0.1
    assert extras["unit_action"].abs().max() > 0.5  # the Worker's own actions span [-1, 1]
    torch.testing.assert_close(algo.worker.unit_to_env(extras["unit_action"]), action)
    torch.testing.assert_close(make_algo().worker.action_high, torch.ones(2))


def test_manager_inputs_swap_then_penalise_only_the_kept_missed_subgoals():
    from agentic_rl.algos.hgpo_losses import manager_inputs

    batch = {"action": torch.tensor([[0.5, 0.5], [-0.5, 0.0]]), "reward": torch.tensor([-3., -2.]),
             "terminated": torch.zeros(2), "missed": torch.tensor([1.0, 0.0])}
    achieved = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    generator = torch.Generator().manual_seed(0)
    kept, swapped = manager_inputs(batch, achieved, 0.0, -10.0, generator)
    assert not swapped.any() and torch.equal(kept["action"], batch["action"])
    torch.testing.assert_close(kept["reward"], torch.tensor([-10.0, -2.0]))
    torch.testing.assert_close(kept["terminated"], torch.tensor([1.0, 0.0]))
    relabelled, swapped = manager_inputs(batch, achieved, 1.0, -10.0, generator)
    assert swapped.all() and torch.equal(relabelled["action"], achieved)
    torch.testing.assert_close(relabelled["reward"], batch["reward"])  # reached by definition
    assert torch.equal(batch["action"], torch.tensor([[0.5, 0.5], [-0.5, 0.0]]))  # not in place
