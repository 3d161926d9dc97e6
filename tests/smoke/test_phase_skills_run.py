"""OPD with phase skills on FetchPickAndPlace-v4 for 100 steps: the demonstrations recorded,
cut into phase buffers, and per-phase metrics logged."""

from __future__ import annotations

import pytest

from agentic_rl.config import validate_config


def test_a_short_pick_and_place_run_logs_per_phase_metrics(tmp_path):
    from agentic_rl.train.logger import read_metrics
    from agentic_rl.train.run import train

    config = validate_config({
        "algorithm": {"name": "opd", "hidden_sizes": [16, 16], "batch_size": 32,
                      "prototype_batch_size": 32, "prototype_episodes": 2,
                      "prototype_data_path": str(tmp_path / "demos.npz"),
                      "phase_skills": {"task": "pick_and_place"}},
        "environment": {"name": "FetchPickAndPlace-v4"},
        "training": {"total_timesteps": 100, "learning_starts": 0, "eval_freq": 100,
                     "num_eval_episodes": 1, "log_freq": 50, "checkpoint_freq": 100}})
    train(config, tmp_path / "run", show_progress=False)
    series = read_metrics(tmp_path / "run" / "metrics.csv")
    assert sum(value for _, value in series["skills/carry_prototypes"][-1:]) > 0
    shares = [series[f"skills/{name}_share"][-1][1]
              for name in ("reach", "grasp", "carry", "place")]
    assert sum(shares) == pytest.approx(1.0)
