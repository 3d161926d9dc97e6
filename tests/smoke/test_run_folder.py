"""The run folder through a user's mishaps: Ctrl-C, a kill before the first checkpoint, a
deleted checkpoint, ``--init-from`` together with ``--resume``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from agentic_rl.cli import main
from tests.conftest import REPO

CONFIG = {"algorithm": {"name": "sac", "batch_size": 32, "hidden_sizes": [16, 16]},
          "environment": {"name": "agentic_rl/PointReach-v0"},
          "training": {"learning_starts": 40, "eval_freq": 40, "log_freq": 40}}


def train_args(log_dir, *extra):
    config = log_dir.parent / "point_sac.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(CONFIG))
    return ["train", str(config), "--log-dir", str(log_dir), "--no-progress", *extra]


def start(log_dir, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agentic_rl.cli", *train_args(log_dir, *extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def wait_for_metrics(run_dir, process, rows: int = 3, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        metrics = run_dir / "metrics.csv"
        if metrics.exists() and len(metrics.read_text().splitlines()) > rows:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.1)
    raise AssertionError("training never logged")


def test_ctrl_c_stops_cleanly_with_a_checkpoint_and_resume_continues(tmp_path):
    run_dir = tmp_path / "point_sac_seed0"
    process = start(tmp_path, "training.total_timesteps=1000000", "training.log_freq=20",
                    "training.checkpoint_freq=1000000", "training.eval_freq=1000000")
    wait_for_metrics(run_dir, process)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "checkpoint written; continue with --resume" in err
    assert (run_dir / "checkpoints" / "latest").exists()
    step = int((run_dir / "checkpoints" / "latest").read_text().split("_")[1])
    assert main(train_args(tmp_path, f"training.total_timesteps={step + 40}", "--resume",
                           "training.num_eval_episodes=2")) == 0
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == step + 40


def test_a_run_killed_before_its_first_checkpoint_can_start_again(tmp_path, capsys):
    run_dir = tmp_path / "point_sac_seed0"
    process = start(tmp_path, "training.total_timesteps=1000000", "training.log_freq=20",
                    "training.checkpoint_freq=1000000", "training.eval_freq=1000000")
    wait_for_metrics(run_dir, process)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    assert not (run_dir / "checkpoints").exists()
    short = ("training.total_timesteps=60", "training.num_eval_episodes=2")
    assert main(train_args(tmp_path, *short, "--resume")) == 0  # from step 0, with a note
    assert "from step 0" in capsys.readouterr().err
    shutil.rmtree(run_dir / "checkpoints")
    assert main(train_args(tmp_path, *short)) == 0  # a plain start works too
    assert "starting it again from step 0" in capsys.readouterr().err


def test_resume_falls_back_to_an_earlier_checkpoint_when_the_latest_is_deleted(tmp_path):
    run_dir = tmp_path / "point_sac_seed0"
    common = ("training.checkpoint_freq=40", "training.num_eval_episodes=2")
    assert main(train_args(tmp_path, "training.total_timesteps=120", *common)) == 0
    folders = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*"))
    assert folders == ["step_000000080", "step_000000120"]
    shutil.rmtree(run_dir / "checkpoints" / "step_000000120")  # as a corrupt-file error advises
    assert main(train_args(tmp_path, "training.total_timesteps=160", *common, "--resume")) == 0
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 160


def test_init_from_is_recorded_and_refused_with_resume(tmp_path, capsys):
    source = tmp_path / "source"
    short = ("training.total_timesteps=40", "training.num_eval_episodes=2")
    assert main(train_args(source, *short)) == 0
    target = tmp_path / "target"
    init = ["--init-from", str(source / "point_sac_seed0")]
    assert main(train_args(target, *short, *init)) == 0
    recorded = json.loads((target / "point_sac_seed0" / "init_from.json").read_text())
    assert recorded["checkpoint"].endswith("step_000000040")
    capsys.readouterr()
    assert main(train_args(target, *short, *init, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --init-from") and "\n" not in err


@pytest.mark.parametrize("episodes", ["0", "-1"])
def test_eval_needs_a_positive_episode_count(tmp_path, capsys, episodes):
    assert main(train_args(tmp_path, "training.total_timesteps=40",
                           "training.num_eval_episodes=2")) == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "point_sac_seed0"), "--episodes", episodes]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--episodes" in err and "\n" not in err


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err, err
    return err


def test_a_checkpoint_of_another_config_is_one_line_in_eval(tmp_path, capsys):
    assert main(train_args(tmp_path, "training.total_timesteps=40",
                           "training.num_eval_episodes=2")) == 0
    config_path = tmp_path / "point_sac_seed0" / "config.yaml"
    saved = yaml.safe_load(config_path.read_text())
    saved["algorithm"]["hidden_sizes"] = [32, 32]
    config_path.write_text(yaml.safe_dump(saved))
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "point_sac_seed0"), "--episodes", "2"]) == 2
    assert "does not fit this config" in one_error_line(capsys)


def test_demos_without_an_expert_and_a_malformed_property_file(tmp_path, capsys):
    assert main(["demos", "--env", "agentic_rl/FourRooms-v0", "--out",
                 str(tmp_path / "d.npz")]) == 2
    assert "no scripted expert" in one_error_line(capsys)
    broken = tmp_path / "broken.yaml"
    broken.write_text("properties: [{name: x, kind: action_box, low: [0]\n")
    assert main(train_args(tmp_path, "training.total_timesteps=40",
                           f"verification.property_file={broken}")) == 2
    one_error_line(capsys)


def tensorboard_steps(run_dir, key: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))  # applies purges, as TB does
    accumulator.Reload()
    return sorted(event.step for event in accumulator.Scalars(key))


def test_a_resumed_run_keeps_the_evaluation_of_its_checkpoint_step(tmp_path):
    short = ("training.num_eval_episodes=2", "training.checkpoint_freq=40")
    assert main(train_args(tmp_path, "training.total_timesteps=80", *short)) == 0
    assert main(train_args(tmp_path, "training.total_timesteps=120", *short, "--resume")) == 0
    run_dir = tmp_path / "point_sac_seed0"
    assert tensorboard_steps(run_dir, "eval/success_rate") == [40, 80, 120]
    csv_rows = [line.split(",") for line in (run_dir / "metrics.csv").read_text().splitlines()]
    assert [int(r[0]) for r in csv_rows[1:] if r[2] == "eval/success_rate"] == [40, 80, 120]
