"""PPO and HGPO in the shared loop: every HGPO variant updates and reloads, the Manager's
log-std cap follows its schedule, a continuous Worker runs on a point maze."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.config import validate_config
from agentic_rl.data.checkpoint import latest_checkpoint, load_learner
from agentic_rl.envs.make import make_env
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from agentic_rl.train.setup import build_algo

OPEN_ROOM = {"name": "agentic_rl/GridWorld-v0", "num_envs": 4,
             "kwargs": {"layout": "open", "size": 4, "max_episode_steps": 10}}


def train_briefly(tmp_path, algorithm: dict, environment: dict = OPEN_ROOM, steps: int = 128):
    """``(config, {metric: [values]}, learner reloaded from the last checkpoint)``."""
    config = validate_config({"algorithm": algorithm, "environment": environment,
                              "training": {"total_timesteps": steps, "log_freq": 64,
                                           "eval_freq": 10**6, "num_eval_episodes": 1}})
    train(config, tmp_path / "run", show_progress=False)
    series = read_metrics(tmp_path / "run" / "metrics.csv")
    env = make_env(environment["name"], environment["kwargs"])
    algo = build_algo(config, env)
    load_learner(algo, latest_checkpoint(tmp_path / "run"))
    return config, {k: [v for _, v in rows] for k, rows in series.items()}, algo


@pytest.mark.parametrize("overrides", [
    {"goal_space": "learned", "conditioning": "film", "intrinsic_reward": "success_predictor"},
    {"manager_recurrent": True, "relabel_goals": True, "goal_change_coef": 0.1},
])
def test_every_hgpo_variant_updates_and_round_trips(tmp_path, overrides):
    algorithm = {"name": "hgpo", "period": 3, "rollout_steps": 16, **overrides}
    config, metrics, algo = train_briefly(tmp_path, algorithm)
    assert {"losses/worker_policy_loss", "losses/manager_policy_loss",
            "train/manager_approx_kl"} <= metrics.keys()
    assert all(math.isfinite(v) for values in metrics.values() for v in values)
    clone = build_algo(config, make_env(OPEN_ROOM["name"], OPEN_ROOM["kwargs"]))
    clone.load_state_dict(algo.state_dict())
    obs = {"observation": torch.zeros(2, 3), "achieved_goal": torch.zeros(2, 2),
           "desired_goal": torch.ones(2, 2), "is_first": torch.ones(2, dtype=torch.bool)}
    torch.testing.assert_close(clone.act(obs, None, "deterministic")[2]["goal"],
                               algo.act(obs, None, "deterministic")[2]["goal"])


def test_manager_log_std_cap_follows_its_schedule_and_round_trips(tmp_path):
    cap = {"start_step": 0, "end_step": 128, "start": 0.5, "end": -1.0}
    _, metrics, algo = train_briefly(tmp_path, {"name": "hgpo", "period": 3, "rollout_steps": 16,
                                                "manager_log_std_cap": cap})
    # 64 env steps per update: caps 0.5 - 1.5 * 64 / 128 = -0.25, then -1.0.
    assert metrics["train/manager_log_std_cap"] == pytest.approx([-0.25, -1.0])
    # One update cannot move the log std from <= -0.25 to below -1, so it ends on the cap.
    torch.testing.assert_close(algo.manager.policy.log_std.detach(), torch.full((2,), -1.0))
    assert algo.env_steps == 128


@pytest.mark.parametrize("conditioning", ["concat", "film"])
def test_hgpo_continuous_worker_on_a_point_maze(tmp_path, conditioning):
    maze = {"name": "agentic_rl/PointMaze_UMaze-v3", "num_envs": 2,
            "kwargs": {"max_episode_steps": 50}}
    algorithm = {"name": "hgpo", "period": 5, "rollout_steps": 32, "goal_scale": 2.0,
                 "conditioning": conditioning, "relabel_goals": True}
    _, metrics, algo = train_briefly(tmp_path, algorithm, maze)
    assert len(metrics["losses/worker_policy_loss"]) == 2
    obs = {k: torch.as_tensor(v)[None] for k, v in
           make_env(maze["name"], maze["kwargs"]).reset(seed=0)[0].items()}
    action, _, extras = algo.act({**obs, "is_first": torch.ones(1, dtype=torch.bool)}, None,
                                 "explore")
    assert action.shape == (1, 2) and (action.abs() <= 1.0).all()
    assert (extras["goal"].abs() < 1.0).all()
