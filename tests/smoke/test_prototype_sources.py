"""Prototype sources in real runs: curriculum stages, skills, and --init-from transfer."""

from __future__ import annotations

import numpy as np
from safetensors.torch import load_file

from agentic_rl.config import validate_config
from agentic_rl.data.checkpoint import latest_checkpoint
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train


def point_config(tmp_path, steps=200, **sections):
    raw = {"algorithm": {"name": "opd", "batch_size": 64, "prototype_batch_size": 64,
                         "opd_alpha": {"schedule": "exponential", "start": 20.0, "end": 0.1,
                                       "steps": 2000},
                         "hidden_sizes": [32, 32], "prototype_episodes": 5,
                         "prototype_data_path": str(tmp_path / "demos.npz")},
           "environment": {"name": "agentic_rl/PointReach-v0"},
           "training": {"total_timesteps": steps, "learning_starts": 0, "eval_freq": 100,
                        "num_eval_episodes": 10, "checkpoint_freq": 100, "log_freq": 100}}
    for section, values in sections.items():
        raw[section] = {**raw[section], **values}
    return validate_config(raw)


def checkpoint_sources(run_dir, skill="default") -> list[str]:
    with np.load(latest_checkpoint(run_dir) / "buffers.npz") as data:
        return list(data[f"storage/prototypes.{skill}/meta.source"])


def test_curriculum_switches_stage_and_keeps_its_successes_as_prototypes(tmp_path):
    curriculum = {"success_threshold": 0.5, "stages": [
        {"name": "near", "env_attrs": {"goal_range": 0.2}},
        {"name": "far", "env_attrs": {"goal_range": 1.0}}]}
    run_dir = tmp_path / "run"
    train(point_config(tmp_path, environment={"curriculum": curriculum}), run_dir,
          show_progress=False)
    stages = [value for _, value in read_metrics(run_dir / "metrics.csv")["curriculum/stage"]]
    assert stages[-1] == 1.0  # the 'near' stage was passed
    sources = checkpoint_sources(run_dir)
    assert "curriculum" in sources and "expert" in sources


def test_two_skills_have_their_own_buffers_and_manager_statistics(tmp_path):
    skills = [{"name": "fast", "prototype_data_path": str(tmp_path / "fast.npz")},
              {"name": "slow", "prototype_data_path": str(tmp_path / "slow.npz"),
               "expert_kwargs": {"gain": 0.3}}]
    run_dir = tmp_path / "run"
    train(point_config(tmp_path, algorithm={"skills": skills, "prototype_data_path": None}),
          run_dir, show_progress=False)
    metrics = read_metrics(run_dir / "metrics.csv")
    pulls = metrics["skills/fast_episodes"][-1][1] + metrics["skills/slow_episodes"][-1][1]
    assert pulls == 10  # 200 steps of 20-step episodes, each assigned to one skill
    assert checkpoint_sources(run_dir, "fast")[0] == "expert"
    assert checkpoint_sources(run_dir, "slow")[0] == "expert"
    with np.load(tmp_path / "fast.npz") as fast, np.load(tmp_path / "slow.npz") as slow:
        assert np.abs(slow["action"]).mean() < np.abs(fast["action"]).mean()


def test_init_from_transfers_actor_and_prototypes(tmp_path):
    source = tmp_path / "source"
    train(point_config(tmp_path), source, show_progress=False)
    target = tmp_path / "target"
    config = point_config(tmp_path, steps=20, training={"learning_starts": 10_000,
                                                         "eval_freq": 20})
    train(config, target, init_from=source, show_progress=False)
    before = load_file(latest_checkpoint(source) / "model.safetensors")
    after = load_file(latest_checkpoint(target) / "model.safetensors")
    for key in before:
        if key.startswith("algo.actor."):
            assert (before[key] == after[key]).all(), key
    assert len(checkpoint_sources(target)) > len(checkpoint_sources(source))
