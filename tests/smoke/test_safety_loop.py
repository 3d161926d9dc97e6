"""The safety monitor and shield inside the training loop and evaluation (SPEC V2, V3)."""

import json

from agentic_rl.cli import main
from tests.conftest import REPO

CONFIG = str(REPO / "configs" / "opd_fetch_reach_safe.yaml")


def test_monitor_counts_every_step_and_the_shield_keeps_evaluation_safe(tmp_path, capsys):
    args = ["train", CONFIG, "--log-dir", str(tmp_path), "--no-progress",
            f"algorithm.prototype_data_path={tmp_path / 'demos.npz'}", "algorithm.prototype_episodes=3",
            "training.total_timesteps=100", "training.eval_freq=100",
            "training.num_eval_episodes=3", "training.log_freq=50", "algorithm.hidden_sizes=[32,32]"]
    assert main(args) == 0
    run_dir = tmp_path / "opd_fetch_reach_safe_seed0"
    safety = json.loads((run_dir / "summary.json").read_text())["safety"]
    assert safety["train"]["steps"] == 100
    assert set(safety["train"]["per_property"]) == {"obstacle", "action_limits"}
    assert safety["eval"]["steps"] == 150 and safety["eval"]["violations"] == 0
    assert safety["train_shield"]["steps"] == 100
    metrics = (run_dir / "metrics.csv").read_text()
    for key in ("safety/violations", "safety/violation_rate", "safety/shield_interventions"):
        assert f",{key}," in metrics
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2", "--no-shield"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["safety"]["shield"] is False and report["safety"]["steps"] == 100
