"""Stable-Baselines3 SAC+HER with the same hyper-parameters as ours, evaluated the same way
(deterministic episodes, success = info["is_success"] at the last step, every EVAL steps)."""

from __future__ import annotations

import time

import numpy as np


def train_sb3_her(env_id: str, total_steps: int, seed: int, eval_freq: int, eval_episodes: int,
                  hidden_sizes=(256, 256), batch_size: int = 256, gamma: float = 0.95,
                  learning_rate: float = 1e-3, tau: float = 0.05, learning_starts: int = 1000,
                  stop_success: float | None = None) -> dict:
    """Train SB3 SAC+HER (future, 4 sampled goals) with observation normalisation (VecNormalize,
    as in rl-zoo); returns ``{"eval_history": [...], "steps_to_target": .., "wall_seconds": ..}``."""
    import gymnasium as gym
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import torch

    from agentic_rl.envs.make import register_all

    torch.set_num_threads(1)  # as every run of ours (the README's convention for benchmarks)
    register_all()
    env = VecNormalize(DummyVecEnv([lambda: gym.make(env_id)]), norm_obs=True,
                       norm_reward=False, clip_obs=5.0)
    eval_env = gym.make(env_id)
    history: list[dict] = []

    def evaluate_model(model) -> float:
        successes = []
        for index in range(eval_episodes):
            obs, _ = eval_env.reset(seed=seed + 1_000_000 + index)
            done, info = False, {}
            while not done:
                norm = env.normalize_obs({k: v[None] for k, v in obs.items()})
                action, _ = model.predict(norm, deterministic=True)
                obs, _, terminated, truncated, info = eval_env.step(action[0])
                done = terminated or truncated
            successes.append(float(info.get("is_success", 0.0)))
        return float(np.mean(successes))

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % eval_freq == 0:
                rate = evaluate_model(self.model)
                history.append({"step": self.num_timesteps, "success_rate": rate})
                print(f"sb3 seed {seed} step {self.num_timesteps}: eval success {rate:.2f}",
                      flush=True)
                if stop_success is not None and rate >= stop_success:
                    return False
            return True

    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
                learning_rate=learning_rate, buffer_size=1_000_000, batch_size=batch_size,
                gamma=gamma, tau=tau, learning_starts=learning_starts,
                policy_kwargs={"net_arch": list(hidden_sizes)}, seed=seed, verbose=0)
    model.set_logger(Logger(None, []))  # no SB3-* log folder left in /tmp
    started = time.perf_counter()
    model.learn(total_timesteps=total_steps, callback=EvalEvery())
    wall = time.perf_counter() - started
    target = stop_success if stop_success is not None else 1.0
    reached = [h["step"] for h in history if h["success_rate"] >= target]
    return {"eval_history": history, "steps_to_target": reached[0] if reached else None,
            "final_success": history[-1]["success_rate"] if history else None,
            "best_success": max((h["success_rate"] for h in history), default=None),
            "env_steps": int(model.num_timesteps), "wall_seconds": round(wall, 1)}
