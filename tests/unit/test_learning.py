"""Every learner learns a tiny goal task (PointReach: seconds on one core)."""

from agentic_rl.config import validate_config
from agentic_rl.train.run import train


def point_config(tmp_path, algorithm: dict, steps: int, **agent):
    return validate_config({
        "algorithm": {"batch_size": 128, "gamma": 0.9, **algorithm},
        "agent": {"hidden_sizes": [64, 64], **agent},
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
