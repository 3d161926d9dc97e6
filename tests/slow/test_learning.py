"""Every learner learns (``pytest -m slow``): the flat and hierarchical off-policy learners
on PointReach, PPO and HGPO on FourRooms (text_opd: test_text_learning.py)."""

import pytest

from agentic_rl.config import validate_config
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train

pytestmark = pytest.mark.slow


def point_config(tmp_path, algorithm: dict, steps: int, **agent):
    return validate_config({
        "algorithm": {"batch_size": 128, "gamma": 0.9, "hidden_sizes": [64, 64], **algorithm,
                      **agent},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": steps, "learning_starts": 0 if agent else 100,
                     "eval_freq": steps, "num_eval_episodes": 30, "checkpoint_freq": steps,
                     "log_freq": steps, "seed": 0}})


def test_opd_learns_point_reach_from_ten_demonstrations(tmp_path):
    config = point_config(
        tmp_path, {"name": "opd", "prototype_batch_size": 128,
                   "opd_alpha": {"schedule": "exponential", "start": 20.0, "end": 0.1,
                                 "steps": 2000}},
        steps=300, prototype_data_path=str(tmp_path / "demos.npz"), prototype_episodes=10)
    summary = train(config, tmp_path / "opd", show_progress=False)
    assert summary["success_rate"] >= 0.9


def test_sac_her_learns_point_reach_without_demonstrations(tmp_path):
    config = point_config(tmp_path, {"name": "sac"}, steps=1500)
    summary = train(config, tmp_path / "sac", show_progress=False)
    assert summary["success_rate"] >= 0.8


def test_td3_her_learns_point_reach(tmp_path):
    config = point_config(tmp_path, {"name": "td3"}, steps=1500)
    summary = train(config, tmp_path / "td3", show_progress=False)
    assert summary["success_rate"] >= 0.8


def test_hgpo_sac_learns_point_reach(tmp_path):
    small = {"hidden_sizes": [64, 64], "batch_size": 128, "gamma": 0.9}
    config = validate_config({
        "algorithm": {"name": "hgpo_sac", "period": 5, "manager": small, "worker": small},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": 3000, "learning_starts": 200, "eval_freq": 3000,
                     "num_eval_episodes": 30, "checkpoint_freq": 3000, "log_freq": 1000}})
    summary = train(config, tmp_path / "hgpo_sac", show_progress=False)
    assert summary["success_rate"] >= 0.8


def fourrooms_config(algorithm: dict, steps: int):
    return validate_config({
        "algorithm": {"rollout_steps": 64, **algorithm},
        "environment": {"name": "agentic_rl/FourRooms-v0", "num_envs": 16,
                        "kwargs": {"max_episode_steps": 100}},
        "training": {"total_timesteps": steps, "eval_freq": steps // 2, "num_eval_episodes": 8,
                     "log_freq": 1024}})


def test_ppo_learns_fourrooms(tmp_path):
    config = fourrooms_config({"name": "ppo", "minibatch_size": 256, "learning_rate": 1e-3,
                               "ent_coef": 0.1}, steps=40_000)
    summary = train(config, tmp_path / "ppo", show_progress=False)
    assert summary["success_rate"] == 1.0
    assert summary["mean_length"] <= 25  # shortest path is 19 steps
    metrics = read_metrics(tmp_path / "ppo" / "metrics.csv")
    assert "losses/policy_loss" in metrics


def test_hgpo_learns_fourrooms(tmp_path):
    config = fourrooms_config({"name": "hgpo", "period": 8, "manager": {"ent_coef": 0.0}},
                              steps=100_000)
    summary = train(config, tmp_path / "hgpo", show_progress=False)
    assert summary["success_rate"] == 1.0
    assert summary["mean_length"] <= 30  # shortest path is 19 steps
    rollout = [v for _, v in read_metrics(tmp_path / "hgpo" / "metrics.csv")[
        "rollout/success_rate"]]
    assert rollout[0] < 0.5 and rollout[-1] >= 0.9  # it learned, stochastically too


def test_sac_her_learns_point_reach_with_the_env_overlapped(tmp_path):
    config = point_config(tmp_path, {"name": "sac"}, steps=1500)
    config = config.model_copy(update={"training": config.training.model_copy(
        update={"overlap_env": True})})
    summary = train(config, tmp_path / "sac", show_progress=False)
    assert summary["success_rate"] >= 0.8
