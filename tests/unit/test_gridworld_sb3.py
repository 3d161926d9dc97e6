"""Our grid worlds as a real Gymnasium client (Stable-Baselines3) sees them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from agentic_rl.envs.gridworld import register_envs


def test_sb3_ppo_trains_on_fourrooms_unchanged():
    torch.set_num_threads(1)
    register_envs()
    env = gym.make("agentic_rl/FourRooms-v0")
    sb3_check_env(env.unwrapped, warn=True)
    model = PPO("MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(int(action))
    assert np.isfinite(model.logger.name_to_value["train/value_loss"])
