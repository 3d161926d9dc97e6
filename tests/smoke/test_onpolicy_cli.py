"""PPO and HGPO through the same CLI, config schema, checkpoints and run folder."""

import json

from agentic_rl.cli import main
from tests.conftest import REPO


def test_smoke_ppo_and_hgpo_train_resume_eval(tmp_path, capsys):
    for name in ("ppo_fourrooms", "hgpo_fourrooms"):
        base = ["train", str(REPO / "configs" / f"{name}.yaml"), "--log-dir", str(tmp_path),
                "--no-progress", "training.eval_freq=1024", "training.checkpoint_freq=1024",
                "training.num_eval_episodes=4"]
        assert main([*base, "training.total_timesteps=2048"]) == 0
        run_dir = tmp_path / f"{name}_seed0"
        assert (run_dir / "checkpoints" / "latest").read_text() == "step_000002048"
        assert main([*base, "training.total_timesteps=3072", "--resume"]) == 0
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["env_steps"] == 3072 and summary["algorithm"] == name.split("_")[0]
        # evaluations of both sessions, the one at the resumed step kept once
        assert [row["step"] for row in summary["eval_history"]] == [1024, 2048, 3072]
        assert 0.0 <= summary["eval_history"][-1]["success_rate"] <= 1.0
        metrics = (run_dir / "metrics.csv").read_text()
        assert "eval/success_rate" in metrics and "losses/" in metrics
        capsys.readouterr()
        assert main(["eval", str(run_dir), "--episodes", "4"]) == 0
        assert json.loads(capsys.readouterr().out)["episodes"] == 4
