"""SAC-Lagrangian in the loop: a short constrained run on PointReach (a forbidden box in the
middle), and a resumed run ending with the weights of an uninterrupted one."""

from __future__ import annotations

import pytest

from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from tests.conftest import assert_same_final_weights
from tests.unit.test_sac_lag import _config


def test_a_constrained_run_learns_a_cost_and_raises_the_multiplier(tmp_path):
    with pytest.warns(UserWarning, match="autograd"):  # the reference update, announced
        summary = train(_config(tmp_path), tmp_path / "run", show_progress=False)
    assert summary["safety"]["train"]["steps"] == 300
    metrics = read_metrics(tmp_path / "run" / "metrics.csv")
    assert metrics["safety/batch_cost"][-1][1] > 0  # starts in the box half the time
    assert metrics["safety/lagrange_multiplier"][-1][1] > 0
    assert "losses/cost_critic_loss" in metrics


def test_a_resumed_constrained_run_ends_with_the_uninterrupted_weights(tmp_path):
    train(_config(tmp_path), tmp_path / "a", show_progress=False)
    short = _config(tmp_path).model_copy(update={"training": _config(
        tmp_path).training.model_copy(update={"total_timesteps": 160})})
    train(short, tmp_path / "b", show_progress=False)
    train(_config(tmp_path), tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")
