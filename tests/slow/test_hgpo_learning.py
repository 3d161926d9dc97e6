"""HGPO learns a small FourRooms (sparse reward, fixed start and goal)."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algos.hgpo import HGPO, HGPOConfig
from agentic_rl.envs.gridworld import BatchGridWorld
from agentic_rl.train.onpolicy import evaluate, train_onpolicy

pytestmark = pytest.mark.slow


def test_hgpo_solves_fourrooms():
    torch.set_num_threads(1)
    kwargs = {"layout": "fourrooms", "max_episode_steps": 100}
    envs = BatchGridWorld(num_envs=16, seed=0, **kwargs)
    eval_env = BatchGridWorld(num_envs=4, seed=1, **kwargs)
    cfg = HGPOConfig(rollout_steps=64, period=8, manager={"ent_coef": 0.0})
    algo = HGPO(cfg, envs.single_observation_space, envs.single_action_space, seed=0)
    logs: list[dict[str, float]] = []
    result = train_onpolicy(algo, envs, eval_env, total_steps=100_000, log=lambda s, m: logs.append(m),
                            rollout_steps=64, eval_freq=50_000, num_eval_episodes=8)
    assert result["eval/success_rate"] == 1.0
    assert result["eval/mean_length"] <= 30  # shortest path is 19 steps
    rollout = [m["rollout/success_rate"] for m in logs if "rollout/success_rate" in m]
    assert rollout[0] < 0.5 and rollout[-1] >= 0.9  # it learned, stochastically too
    assert evaluate(algo, eval_env, 8, seed=5)["eval/success_rate"] == 1.0
