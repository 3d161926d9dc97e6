"""SAC-Lagrangian and PPO-Lagrangian in the loop: short constrained runs (PointReach with a
forbidden box in the middle; a grid room with a lava cell), and resumed runs ending with the
weights of uninterrupted ones."""

from __future__ import annotations

import pytest

from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from tests.conftest import assert_same_final_weights
from tests.unit.test_lagrangian import _config, _lava_config


def test_a_constrained_run_learns_a_cost_and_raises_the_multiplier(tmp_path):
    with pytest.warns(UserWarning, match="autograd"):  # the reference update, announced
        summary = train(_config(tmp_path), tmp_path / "run", show_progress=False)
    assert summary["safety"]["train"]["steps"] == 300
    metrics = read_metrics(tmp_path / "run" / "metrics.csv")
    assert metrics["safety/batch_cost"][-1][1] > 0  # starts in the box half the time
    assert metrics["safety/lagrange_multiplier"][-1][1] > 0
    assert "losses/cost_critic_loss" in metrics


def test_resetting_on_violations_leaves_at_most_one_per_training_episode(tmp_path):
    config = _config(tmp_path)
    reset = config.model_copy(update={"verification": config.verification.model_copy(
        update={"reset_on_violation": True})})
    with pytest.warns(UserWarning, match="autograd"):
        plain = train(config, tmp_path / "plain", show_progress=False)["safety"]["train"]
        ours = train(reset, tmp_path / "reset", show_progress=False)["safety"]["train"]
    assert ours["steps"] == plain["steps"] == 300
    assert 0 < ours["violations"] < plain["violations"]
    episodes = read_metrics(tmp_path / "reset" / "metrics.csv")["time/episodes"][-1]
    assert episodes[0] == 300 and ours["violations"] <= episodes[1]


def test_a_resumed_constrained_run_ends_with_the_uninterrupted_weights(tmp_path):
    train(_config(tmp_path), tmp_path / "a", show_progress=False)
    short = _config(tmp_path).model_copy(update={"training": _config(
        tmp_path).training.model_copy(update={"total_timesteps": 160})})
    train(short, tmp_path / "b", show_progress=False)
    train(_config(tmp_path), tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")



def test_ppo_lag_raises_its_multiplier_on_lava(tmp_path):
    summary = train(_lava_config(tmp_path), tmp_path / "run", show_progress=False)
    assert summary["safety"]["train"]["violations"] > 0
    metrics = read_metrics(tmp_path / "run" / "metrics.csv")
    assert metrics["safety/lagrange_multiplier"][-1][1] > 0 and "safety/episode_cost" in metrics


def test_a_resumed_ppo_lag_run_ends_with_the_uninterrupted_weights(tmp_path):
    # key-door with a 10-step limit: no episode ends early, so checkpoints are exact
    grid = {"name": "agentic_rl/KeyDoor-v0", "kwargs": {"max_episode_steps": 10}}
    train(_lava_config(tmp_path, environment=grid), tmp_path / "a", show_progress=False)
    train(_lava_config(tmp_path, steps=200, environment=grid), tmp_path / "b",
          show_progress=False)
    train(_lava_config(tmp_path, environment=grid), tmp_path / "b", resume=True,
          show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")
