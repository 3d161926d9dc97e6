"""SAC-Lagrangian and PPO-Lagrangian: the cost target, the multiplier step, the combined
advantage and episode costs by hand, the cost from the property file, the learners' state
(runs: tests/smoke/test_lagrangian_runs.py)."""

from __future__ import annotations

import pytest
import torch
import yaml

from agentic_rl.algos.ppo_lag import combined_advantage, finished_episode_costs
from agentic_rl.algos.lagrangian import lagrange_step
from agentic_rl.algos.sac_lag import SACLag, cost_q_target
from agentic_rl.config import ConfigError, validate_config


def test_cost_target_takes_the_largest_estimate_and_stops_at_termination():
    cost = torch.tensor([1.0, 0.0])
    next_qc = torch.tensor([[0.5, 2.0], [1.5, 1.0]])  # [num_q, B]
    target = cost_q_target(cost, torch.tensor([0.0, 1.0]), next_qc, gamma=0.9)
    torch.testing.assert_close(target, torch.tensor([1.0 + 0.9 * 1.5, 0.0]))


def test_the_multiplier_rises_above_the_limit_and_never_goes_negative():
    assert lagrange_step(0.2, cost_estimate=1.5, limit=0.5, lr=0.1) == pytest.approx(0.3)
    assert lagrange_step(0.2, cost_estimate=0.0, limit=0.5, lr=0.1) == pytest.approx(0.15)
    assert lagrange_step(0.01, cost_estimate=0.0, limit=0.5, lr=0.1) == 0.0


def _config(tmp_path, **algorithm):
    properties = tmp_path / "box.yaml"
    properties.write_text(yaml.safe_dump({"parts": {"pos": [0, 2]}, "properties": [
        {"name": "box", "kind": "forbidden_box", "part": "pos", "low": [-0.3, -0.3],
         "high": [0.3, 0.3]}]}))
    return validate_config({
        "algorithm": {"name": "sac_lag", "hidden_sizes": [16, 16], "batch_size": 32,
                      "lagrange_lr": 0.5, **algorithm},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": 300, "learning_starts": 50, "eval_freq": 150,
                     "num_eval_episodes": 2, "log_freq": 100, "checkpoint_freq": 150},
        "verification": {"property_file": str(properties)}})


def test_the_cost_is_one_on_transitions_into_the_box(tmp_path):
    from agentic_rl.train.setup import build_run

    learner = build_run(_config(tmp_path), tmp_path / "probe").algo
    assert isinstance(learner, SACLag)
    batch = {"next_obs": torch.tensor([[0.0, 0.0], [0.9, 0.9]]), "action": torch.zeros(2, 2)}
    torch.testing.assert_close(learner.step_cost(batch), torch.tensor([1.0, 0.0]))
    state = learner.state_dict()
    assert "cost_critic" in state and "cost_optimizer" in state and "lagrange" in state


def test_sac_lag_without_a_property_file_is_a_config_error(tmp_path):
    from agentic_rl.train.setup import build_run

    config = validate_config({"algorithm": {"name": "sac_lag"},
                              "environment": {"name": "agentic_rl/PointReach-v0"}})
    with pytest.raises(ConfigError, match="property_file"):
        build_run(config, tmp_path / "run")


def test_the_lagrangian_advantage_by_hand():
    reward_adv, cost_adv = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 1.0])
    torch.testing.assert_close(combined_advantage(reward_adv, cost_adv, 1.0),
                               torch.tensor([0.25, -1.5]))
    torch.testing.assert_close(combined_advantage(reward_adv, cost_adv, 0.0), reward_adv)


def test_episode_costs_are_summed_across_rollouts():
    costs = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])  # [T, N]
    dones = torch.tensor([[False, False], [True, False], [False, True]])
    totals, running = finished_episode_costs(costs, dones, torch.tensor([2.0, 0.0]))
    assert totals == [4.0, 2.0]  # env 0 carried 2 from the previous rollout
    torch.testing.assert_close(running, torch.tensor([0.0, 0.0]))


def _lava_config(tmp_path, name: str = "ppo_lag", steps: int = 400,
                 environment: dict | None = None):
    from tests.conftest import REPO

    return validate_config({
        "algorithm": {"name": name, "rollout_steps": 20, "hidden_sizes": [16]},
        "environment": environment or {"name": "agentic_rl/GridWorld-v0",
                                       "kwargs": {"size": 6, "max_episode_steps": 20}},
        "training": {"total_timesteps": steps, "eval_freq": 200, "num_eval_episodes": 3,
                     "log_freq": 100, "checkpoint_freq": 200},
        "verification": {"property_file": str(REPO / "configs/safety/gridworld_lava.yaml")}})


def test_margin_costs_by_hand():
    import numpy as np

    from agentic_rl.algos.lagrangian import violation_costs
    from agentic_rl.verify.spec import PropertySet

    properties = PropertySet.model_validate({"parts": {"pos": [0, 2]}, "properties": [
        {"name": "box", "kind": "forbidden_box", "part": "pos", "low": [0, 0], "high": [1, 1]},
        {"name": "floor", "kind": "state_halfspace", "part": "pos", "a": [0, -2], "b": 4},
        {"name": "room", "kind": "state_box", "part": "pos", "low": [-5, -5], "high": [5, 5]}]})
    states = np.array([[0.5, 0.5],     # in the box
                       [1.3, 1.4],     # 0.5 from the box's corner (3-4-5): 1 - 0.5 / 1
                       [1.0, -1.8],    # 0.2 above the floor y = -2: 1 - 0.2 / 1
                       [4.6, 3.0],     # 0.4 inside the room's face x = 5: 1 - 0.4 / 1
                       [3.0, 3.0]])    # far from everything
    assert violation_costs(properties, states).tolist() == [1, 0, 0, 0, 0]
    np.testing.assert_allclose(violation_costs(properties, states, margin=1.0),
                               [1.0, 0.5, 0.8, 0.6, 0.0], atol=1e-6)
    np.testing.assert_allclose(violation_costs(properties, states, margin=0.25),
                               [1.0, 0.0, 0.2, 0.0, 0.0], atol=1e-6)


def test_sac_lag_step_cost_reads_the_margin(tmp_path):
    from agentic_rl.train.setup import build_run

    learner = build_run(_config(tmp_path, cost_margin=0.2), tmp_path / "probe").algo
    batch = {"next_obs": torch.tensor([[0.0, 0.0], [0.4, 0.0], [0.9, 0.9]]),
             "action": torch.zeros(3, 2)}
    torch.testing.assert_close(learner.step_cost(batch), torch.tensor([1.0, 0.5, 0.0]))


def test_the_multiplier_answers_to_violations_not_to_the_margin(tmp_path):
    from agentic_rl.train.setup import build_run

    learner = build_run(_config(tmp_path, cost_margin=0.2, init_lagrange=1.0, cost_limit=0.1),
                        tmp_path / "probe").algo
    near = torch.tensor([[0.9, 0.9], [0.4, 0.0], [0.35, 0.0], [0.45, 0.0]])  # near, never in
    goals = torch.zeros(4, 2)
    learner.observe({"observation": near, "desired_goal": goals, "achieved_goal": goals})
    assert learner.lagrange == pytest.approx(1.0 - 0.5 * 0.1)  # episode cost 0: lambda falls
    inside = near.clone()
    inside[1:3] = 0.0  # two steps in the box
    learner.observe({"observation": inside, "desired_goal": goals, "achieved_goal": goals})
    assert learner.lagrange == pytest.approx(0.95 + 0.5 * (2 - 0.1))


def test_safe_rl_reports_the_violation_ratio_cumulatively_by_quarter():
    # benchmarks/safe_rl.py: the bar's ratio at each quarter's budget, seed means first
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("safe_rl", REPO / "benchmarks" / "safe_rl.py")
    safe_rl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(safe_rl)
    constrained = [{"train_violations_by_quarter": [8, 1, 1, 0]},
                   {"train_violations_by_quarter": [10, 0, 0, 0]}]  # mean 9, 9.5, 10, 10
    plain = [{"train_violations_by_quarter": [30, 10, 15, 15]},
             {"train_violations_by_quarter": [34, 12, 19, 11]}]  # mean 32, 43, 60, 73
    ratios = safe_rl.cumulative_ratios(constrained, plain)
    assert ratios == pytest.approx([32 / 9, 43 / 9.5, 6.0, 7.3])
    none_yet = [{"train_violations_by_quarter": [0, 0, 1, 0]}]
    assert safe_rl.cumulative_ratios(none_yet, plain[:1])[:2] == [float("inf")] * 2


def test_safe_rl_twin_drops_the_constraint_unless_told_to_keep_it(tmp_path):
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("safe_rl", REPO / "benchmarks" / "safe_rl.py")
    safe_rl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(safe_rl)
    config = yaml.safe_load((REPO / "configs" / "sac_lag_fetch_reach_obstacle.yaml").read_text())
    config["verification"]["reset_on_violation"] = True
    path = tmp_path / "lag.yaml"
    path.write_text(yaml.safe_dump(config))
    lag = safe_rl.method_config(str(path), "sac_lag", ["training.seed=3"])
    assert lag["verification"]["reset_on_violation"] and lag["algorithm"]["cost_limit"] == 0
    twin = safe_rl.method_config(str(path), "sac", ["training.seed=3"])
    assert "reset_on_violation" not in twin["verification"] and "cost_limit" not in twin[
        "algorithm"] and twin["algorithm"]["name"] == "sac" and twin["training"]["seed"] == 3
    told = safe_rl.method_config(str(path), "sac", ["verification.reset_on_violation=true"])
    assert told["verification"]["reset_on_violation"] is True
