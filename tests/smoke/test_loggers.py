"""``training.loggers``: csv, TensorBoard and WandB (offline, as a test must run), each
switchable; a resumed run continues the same WandB run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentic_rl.config import ConfigError, validate_config
from agentic_rl.train.run import train

TINY = {"algorithm": {"name": "sac", "batch_size": 16, "hidden_sizes": [8, 8]},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": 60, "learning_starts": 20, "eval_freq": 30,
                     "num_eval_episodes": 2, "checkpoint_freq": 30, "log_freq": 30}}


def config_with(**training):
    return validate_config({**TINY, "training": {**TINY["training"], **training}})


def written_within(path: Path, text: bytes, seconds: float = 60.0) -> bool:
    """Whether ``text`` is in the file at ``path`` within ``seconds``: wandb's service process
    writes the offline record and may still be writing it when ``finish()`` returns (seen on a
    loaded machine: the 7-byte header alone)."""
    deadline = time.monotonic() + seconds
    while text not in path.read_bytes():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_wandb_offline_run_gets_the_scalars_and_resume_continues_it(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    train(config_with(loggers=["csv", "wandb"]), run_dir, show_progress=False)
    records = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(records) == 1 and written_within(records[0], b"eval/success_rate")
    assert not (run_dir / "tensorboard").exists()
    run_id = (run_dir / "wandb_id").read_text()
    assert records[0].name == f"run-{run_id}.wandb"
    train(config_with(loggers=["csv", "wandb"], total_timesteps=90), run_dir, resume=True,
          show_progress=False)
    assert {p.name for p in (run_dir / "wandb").glob("offline-run-*/run-*.wandb")} == {
        f"run-{run_id}.wandb"}  # the same run continued


def test_tensorboard_alone_writes_no_csv(tmp_path):
    train(config_with(loggers=["tensorboard"]), tmp_path / "run", show_progress=False)
    assert (tmp_path / "run" / "tensorboard").is_dir()
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_wandb_keys_without_wandb_and_duplicates_are_errors():
    with pytest.raises(ConfigError, match="read only with wandb in training.loggers"):
        config_with(wandb_mode="online")
    with pytest.raises(ConfigError, match="lists one twice"):
        config_with(loggers=["csv", "csv"])
    with pytest.raises(ConfigError, match="training.loggers"):
        config_with(loggers=["mlflow"])
