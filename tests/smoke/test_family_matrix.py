"""Every feature of the shared loop in every family it trains: safety monitor and shields,
early stop, curriculum, device, and a resumed run that ends with the weights of an
uninterrupted one. Off-policy families run the tiny PointReach task; on-policy ones (ppo, hgpo)
a small grid (key-door with a 10-step limit: no episode can end early, so checkpoints fall on
episode boundaries) and an open room with a lava cell for the discrete shield."""

from __future__ import annotations

import shutil

import pytest
import yaml

from agentic_rl.config import validate_config
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from tests.conftest import REPO, assert_same_final_weights

SMALL = {"hidden_sizes": [16, 16], "batch_size": 32}
FAMILIES = {
    "sac": {"name": "sac", "batch_size": 32},
    "opd": {"name": "opd", "batch_size": 32, "prototype_batch_size": 32},
    "td3": {"name": "td3", "batch_size": 32},
    "hgpo_sac": {"name": "hgpo_sac", "period": 5, "manager": SMALL, "worker": SMALL},
    "ppo": {"name": "ppo", "rollout_steps": 20, "hidden_sizes": [16]},
    "hgpo": {"name": "hgpo", "period": 4, "rollout_steps": 20},
}
ON_POLICY = ("ppo", "hgpo")
GRID = {"name": "agentic_rl/KeyDoor-v0", "kwargs": {"max_episode_steps": 10}}
LAVA_ROOM = {"name": "agentic_rl/GridWorld-v0", "kwargs": {"size": 6, "max_episode_steps": 20}}


def family_config(tmp_path, family: str, steps: int = 200, **sections):
    nets = {} if family in ("hgpo_sac", *ON_POLICY) else {"hidden_sizes": [16, 16]}
    if family == "opd":
        nets["prototype_data_path"] = str(tmp_path / "demos.npz")
        nets["prototype_episodes"] = 5
    raw = {"algorithm": {**FAMILIES[family], **nets},
           "environment": GRID if family in ON_POLICY else {"name": "agentic_rl/PointReach-v0"},
           "training": {"total_timesteps": steps, "learning_starts": 40, "eval_freq": 100,
                        "num_eval_episodes": 3, "checkpoint_freq": 100, "log_freq": 100}}
    if family in ON_POLICY:  # no random-action phase
        del raw["training"]["learning_starts"]
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return validate_config(raw)


@pytest.mark.parametrize("family", FAMILIES)
def test_monitor_and_shields(tmp_path, family):
    if family in ON_POLICY:  # a discrete shield: moves into the lava cell are masked
        properties, environment = REPO / "configs" / "safety" / "gridworld_lava.yaml", LAVA_ROOM
    else:  # a continuous one: actions are projected into a gentle box
        properties, environment = tmp_path / "gentle.yaml", {}
        properties.write_text(yaml.safe_dump({"parts": {"pos": [0, 2]}, "properties": [
            {"name": "gentle", "kind": "action_box", "low": [-0.5, -0.5], "high": [0.5, 0.5]}]}))
    config = family_config(tmp_path, family, environment=environment, verification={
        "property_file": str(properties), "shield_train": True, "shield_eval": True})
    summary = train(config, tmp_path / "run", show_progress=False)
    safety = summary["safety"]
    assert safety["train"]["steps"] == 200 and safety["train"]["violations"] == 0
    assert safety["eval"]["steps"] > 0 and safety["eval"]["violations"] == 0
    assert safety["train_shield"]["interventions"] > 0  # exploring actions had to be changed


@pytest.mark.parametrize("family", FAMILIES)
def test_stop_success_rate_and_device(tmp_path, family):
    config = family_config(tmp_path, family, training={"stop_success_rate": 0.0,
                                                       "device": "auto"})
    summary = train(config, tmp_path / "run", show_progress=False)
    assert summary["env_steps"] == 100  # stopped at the first evaluation


@pytest.mark.parametrize("family", FAMILIES)
def test_curriculum_moves_on(tmp_path, family):
    attribute, values = ("max_episode_steps", (5, 10)) if family in ON_POLICY else (
        "goal_range", (0.2, 1.0))
    curriculum = {"success_threshold": 0.0, "stages": [
        {"name": "near", "env_attrs": {attribute: values[0]}},
        {"name": "far", "env_attrs": {attribute: values[1]}}]}
    config = family_config(tmp_path, family, environment={"curriculum": curriculum})
    train(config, tmp_path / "run", show_progress=False)
    stages = read_metrics(tmp_path / "run" / "metrics.csv")["curriculum/stage"]
    assert [value for _, value in stages] == [1.0, 1.0]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_resumed_run_ends_with_the_uninterrupted_weights(tmp_path, family):
    train(family_config(tmp_path, family, steps=300), tmp_path / "a", show_progress=False)
    train(family_config(tmp_path, family, steps=160), tmp_path / "b", show_progress=False)
    train(family_config(tmp_path, family, steps=300), tmp_path / "b", resume=True,
          show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")


def assert_hgpo_sac_resumes_exactly(tmp_path, switches: dict) -> None:
    """An hgpo_sac run with ``switches`` interrupted at step 160 and resumed ends with the
    weights of an uninterrupted 300-step run."""
    def config(steps):
        return family_config(tmp_path, "hgpo_sac", steps=steps, algorithm=switches)

    train(config(300), tmp_path / "a", show_progress=False)
    train(config(160), tmp_path / "b", show_progress=False)
    train(config(300), tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")


def test_relative_tested_subgoals_resume_exactly(tmp_path):
    """hgpo_sac's subgoal tests draw from its generator and add a field to the Manager's
    replay: both are in the checkpoint."""
    assert_hgpo_sac_resumes_exactly(
        tmp_path, {"subgoals": "relative", "goal_scale": 0.5, "subgoal_testing": 0.5})


def test_landmark_planner_resumes_exactly(tmp_path):
    """The planner's graph (landmarks, edges, failed hops) is rebuilt from the replay during
    training and chooses the training subgoals here: it is in the checkpoint."""
    assert_hgpo_sac_resumes_exactly(tmp_path, {"planner": {
        "landmarks": 8, "candidates": 64, "refresh_every": 20, "use": "train_and_eval"}})
    metrics = read_metrics(tmp_path / "b" / "metrics.csv")
    built = metrics["planner/connected_pairs"]
    assert built and all(0 <= value <= 1 for _, value in built)
    assert "planner/failed_hops" in metrics


def test_self_imitation_resumes_exactly(tmp_path):
    """HGPO's kept episodes and each env's unfinished rows are in the checkpoint: in a small
    open room episodes succeed (and are kept) from the first rollouts and end at any step, so
    the run resumes from the checkpoint before its last (taken at an episode boundary)."""
    config = family_config(
        tmp_path, "hgpo", steps=300, training={"checkpoint_freq": 40},
        algorithm={"self_imitation": {"coef": 1.0, "episodes": 4, "batch_size": 8}},
        environment={"name": "agentic_rl/GridWorld-v0", "num_envs": 1,
                     "kwargs": {"size": 3, "max_episode_steps": 10}})
    train(config, tmp_path / "a", show_progress=False)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    earlier, last = sorted((tmp_path / "b" / "checkpoints").glob("step_*"))
    shutil.rmtree(last)
    train(config, tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")
    kept = read_metrics(tmp_path / "b" / "metrics.csv")["train/elite_episodes"]
    assert any(value > 0 for step, value in kept if step <= int(earlier.name[5:]))
