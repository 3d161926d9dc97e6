"""Tiny end-to-end runs through the CLI: train, eval, demos, plot, resume, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from safetensors.torch import load_file

from agentic_rl.cli import main
from tests.conftest import REPO

POINT = str(REPO / "configs" / "opd_point.yaml")


def point_args(tmp_path, *extra):
    demo = tmp_path / "demos" / "point.npz"
    return [POINT, "--log-dir", str(tmp_path / "runs"), "--no-progress",
            f"algorithm.prototype_data_path={demo}", *extra]


def test_smoke_train_eval_plot(tmp_path, capsys):
    assert main(["train", *point_args(tmp_path, "training.total_timesteps=200")]) == 0
    run_dir = tmp_path / "runs" / "opd_point_seed0"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 200 and 0.0 <= summary["success_rate"] <= 1.0
    assert set(summary) >= {"success_rate", "mean_return", "env_steps", "wall_seconds", "seed"}
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["training"]["total_timesteps"] == 200 and saved["algorithm"]["name"] == "opd"
    metrics = (run_dir / "metrics.csv").read_text()
    for key in ("eval/success_rate", "losses/actor_sac_loss", "losses/actor_distill_loss",
                "losses/actor_total_loss", "train/alpha", "train/entropy", "train/policy_std"):
        assert key in metrics
    assert list((run_dir / "tensorboard").glob("events.out.tfevents*"))
    assert (run_dir / "learning_curve.png").stat().st_size > 10_000
    assert "learning curve:" in capsys.readouterr().out

    report = tmp_path / "eval.json"
    assert main(["eval", str(run_dir), "--episodes", "5", "--json", str(report)]) == 0
    assert json.loads(report.read_text())["episodes"] == 5
    assert summary["best_model"] == str(run_dir / "best")  # a model folder eval takes as is
    assert main(["eval", str(run_dir / "best"), "--episodes", "2", "--json", str(report)]) == 0
    assert json.loads(report.read_text())["episodes"] == 2
    out = tmp_path / "plot.png"
    assert main(["plot", str(run_dir), str(run_dir), "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


def test_smoke_demos_writes_raw_successful_episodes(tmp_path, capsys):
    out = tmp_path / "d.npz"
    assert main(["demos", "--env", "agentic_rl/PointReach-v0", "--episodes", "3",
                 "--out", str(out)]) == 0
    with np.load(out) as data:
        assert data["episode_success"].all() and len(data["episode_length"]) == 3
        assert np.abs(data["obs"]).max() <= 1.0  # raw positions, not normalised values
    assert "expert success rate 1.00" in capsys.readouterr().out


def crash_after(monkeypatch, calls: int) -> None:
    """Make the learner raise on its ``calls``-th update, as a killed process would stop."""
    from agentic_rl.algos.sac import SAC

    original, counter = SAC.update, {"n": 0}

    def update(self, batch):
        counter["n"] += 1
        if counter["n"] == calls:
            raise RuntimeError("simulated crash")
        return original(self, batch)

    monkeypatch.setattr(SAC, "update", update)


def test_resume_after_crash_gives_the_same_weights(tmp_path, monkeypatch):
    steps = "training.total_timesteps=400"
    assert main(["train", *point_args(tmp_path / "a", steps)]) == 0
    with monkeypatch.context() as patch:
        crash_after(patch, 310)
        with pytest.raises(RuntimeError, match="simulated crash"):
            main(["train", *point_args(tmp_path / "b", steps)])
    run_b = tmp_path / "b" / "runs" / "opd_point_seed0"
    assert (run_b / "checkpoints" / "latest").read_text() == "step_000000200"
    assert "300," in (run_b / "metrics.csv").read_text()  # metrics up to the crash survive
    assert main(["train", *point_args(tmp_path / "b", steps, "--resume")]) == 0
    run_a = tmp_path / "a" / "runs" / "opd_point_seed0"
    final_a = load_file(run_a / "checkpoints" / "step_000000400" / "model.safetensors")
    final_b = load_file(run_b / "checkpoints" / "step_000000400" / "model.safetensors")
    assert final_a.keys() == final_b.keys()
    for key in final_a:
        assert (final_a[key] == final_b[key]).all(), key
    rows = [line.split(",") for line in (run_b / "metrics.csv").read_text().splitlines()[1:]]
    eval_steps = [int(r[0]) for r in rows if r[2] == "eval/success_rate"]
    assert eval_steps == [100, 200, 300, 400]  # no duplicated rows after the resume


def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    cases = [
        ([POINT, "algorithm.hiden_sizes=[8]"], "algorithm.hidden_sizes"),
        ([POINT, "training.seed=abc"], "training.seed"),
        ([POINT, "environment.name=FetchRech-v4"], "did you mean FetchReach-v4"),
        ([POINT, "environment.name=FetchSlide-v4", "algorithm.prototype_data_path=/nope/x.npz"],
         "/nope/x.npz does not exist"),
    ]
    for args, expected in cases:
        code = main(["train", *args, "--log-dir", str(tmp_path / "r"), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith("error: ") and expected in err, err
        assert "\n" not in err
    run_dir = tmp_path / "runs" / "opd_point_seed0"
    assert main(["train", *point_args(tmp_path, "training.total_timesteps=40",
                                      "training.checkpoint_freq=20")]) == 0
    latest = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text()
    model = latest / "model.safetensors"
    model.write_bytes(model.read_bytes()[:100])
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "corrupt or truncated" in err and "\n" not in err
    assert main(["train", *point_args(tmp_path, "training.total_timesteps=40")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_smoke_verify_writes_a_report_for_each_property(tmp_path, capsys):
    assert main(["train", *point_args(tmp_path, "training.total_timesteps=40",
                                      "training.checkpoint_freq=20")]) == 0
    run_dir = tmp_path / "runs" / "opd_point_seed0"
    properties = tmp_path / "props.yaml"
    properties.write_text(
        "parts: {pos: [0, 2]}\n"
        "region: {low: [-0.1, -0.1, 0.5, 0.5], high: [0.1, 0.1, 0.6, 0.6]}\n"
        "properties:\n"
        "  - {name: bounded, kind: action_box, low: [-1.5, -1.5], high: [1.5, 1.5]}\n"
        "  - {name: never_right, kind: action_box, low: [-1, -1], high: [-0.999, 1]}\n")
    capsys.readouterr()
    assert main(["verify", str(run_dir), "--property", str(properties)]) == 0
    report = json.loads((run_dir / "verify.json").read_text())
    status = {r["name"]: r["status"] for r in report["results"]}
    assert status == {"bounded": "proved", "never_right": "falsified"}
    assert main(["verify", str(run_dir), "--property", str(tmp_path / "none.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_smoke_a_bounded_policy_acts_and_is_verified_inside_its_bound(tmp_path, capsys):
    args = [POINT, "--log-dir", str(tmp_path / "runs"), "--no-progress",
            "algorithm.action_bound=0.3", "training.total_timesteps=40",
            "training.checkpoint_freq=20"]
    assert main(["train", *args]) == 2  # the config's demonstrations use the whole range
    assert "action_bound" in capsys.readouterr().err
    sac = yaml.safe_load(open(POINT).read())
    for key in ("opd_alpha", "prototype_batch_size", "prototype_data_path", "prototype_episodes"):
        del sac["algorithm"][key]
    sac["algorithm"]["name"] = "sac"
    (tmp_path / "sac_point.yaml").write_text(yaml.safe_dump(sac))
    assert main(["train", str(tmp_path / "sac_point.yaml"), *args[1:],
                 "training.learning_starts=30"]) == 0
    run_dir = tmp_path / "runs" / "sac_point_seed0"
    properties = tmp_path / "props.yaml"
    properties.write_text(  # far beyond the observations seen: the tanh saturates
        "region: {low: [-100, -100, -100, -100], high: [100, 100, 100, 100]}\n"
        "properties:\n"
        "  - {name: bounded, kind: action_box, low: [-0.3001, -0.3001], high: [0.3001, 0.3001]}\n")
    assert main(["verify", str(run_dir), "--property", str(properties)]) == 0
    report = json.loads((run_dir / "verify.json").read_text())
    # mapped to the env's whole box instead, the same policy is not proved bounded (unknown)
    assert [r["status"] for r in report["results"]] == ["proved"]
