"""``agentic-rl sweep`` on a real local Ray (started and stopped by the command): settings x
seeds as run folders in the sweep folder, a table and curves, a failed trial reported while
the rest finish, and ``--resume`` that reruns nothing finished."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from agentic_rl.cli import main

pytest.importorskip("ray.tune", reason="sweeps need the [ray] extra (make test installs it)")

TINY = {"algorithm": {"name": "sac", "batch_size": 16, "hidden_sizes": [8, 8]},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": 80, "learning_starts": 20, "eval_freq": 40,
                     "num_eval_episodes": 2, "checkpoint_freq": 40, "log_freq": 40}}


def sweep_args(tmp_path, *extra: str) -> list[str]:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    return ["sweep", str(config), "--log-dir", str(tmp_path), "--seeds", "2",
            "--param", "environment.name=[agentic_rl/PointReach-v0,NoSuchEnv-v0]",
            "--param", "algorithm.gamma=[0.9]", *extra]


def test_sweep_writes_runs_table_and_curves_and_resume_reruns_nothing(tmp_path, capsys):
    assert main(sweep_args(tmp_path)) == 0
    folder = tmp_path / "sweep_tiny"
    out, err = capsys.readouterr()
    assert err.count("failed trial") == 2 and "unknown environment id 'NoSuchEnv-v0'" in err
    summaries = sorted(folder.glob("*/run/summary.json"))
    assert len(summaries) == 2  # the two seeds of the setting that works
    assert {json.loads(s.read_text())["seed"] for s in summaries} == {0, 1}
    with open(folder / "sweep_summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["setting"], r["seeds"]) for r in rows] == [
        ("algorithm.gamma=0.9, environment.name=agentic_rl/PointReach-v0", "2")]
    assert "| algorithm.gamma=0.9, environment.name=agentic_rl/PointReach-v0 | 2 (0) |" in out
    assert (folder / "sweep_curves.png").stat().st_size > 0
    assert main(["plot", str(folder), "--out", str(tmp_path / "curves.png")]) == 0
    stamps = [s.stat().st_mtime_ns for s in summaries]
    assert main(sweep_args(tmp_path, "--resume")) == 0
    assert [s.stat().st_mtime_ns for s in summaries] == stamps  # finished trials not rerun


def test_sweep_mistakes_are_one_line_before_ray_starts(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    for args, message in (
            (["--param", "algorithm.gamma=0.9"], "must look like section.key=[v1,v2,...]"),
            (["--param", "algorithm.gama=[0.9]"], "did you mean 'algorithm.gamma'"),
            (["--param", "algorithm.gamma=[0.9]", "--resume"], "holds no sweep")):
        assert main(["sweep", str(config), "--log-dir", str(tmp_path), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err and message in err, err
