"""PointReach: a tiny goal-conditioned task for tests and quick checks (like SB3's bit-flipping
env). A point in [-1, 1]^2 moves by ``0.1 * action`` per step towards a random goal; reward is
-1 until it is within ``distance_threshold`` of the goal (0 then), as in the Fetch tasks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from agentic_rl.envs.registration import POINT_ID
from agentic_rl.envs.registration import register_envs as register_all_ids

ENV_ID = POINT_ID


class PointReachEnv(gym.Env):
    """Dict observation: ``observation`` = position (2), ``achieved_goal`` = position,
    ``desired_goal`` = goal. Episodes end by time limit only (``max_episode_steps``)."""

    metadata = {"render_modes": []}

    def __init__(self, distance_threshold: float = 0.1, step_size: float = 0.1,
                 reward_type: str = "sparse", goal_range: float = 1.0) -> None:
        self.distance_threshold, self.step_size, self.reward_type = (
            distance_threshold, step_size, reward_type)
        self.goal_range = goal_range  # goals are drawn from [-goal_range, goal_range]^2
        box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.position = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.position.copy(), "achieved_goal": self.position.copy(),
                "desired_goal": self.goal.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-self.goal_range, self.goal_range, 2).astype(
            np.float32)
        return self._obs(), {}

    def step(self, action: np.ndarray):
        action = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + self.step_size * action, -1.0, 1.0)
        reward = float(self.compute_reward(self.position, self.goal, {}))
        info = {"is_success": float(reward == 0.0) if self.reward_type == "sparse"
                else float(np.linalg.norm(self.position - self.goal) < self.distance_threshold)}
        return self._obs(), reward, False, False, info

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        if self.reward_type == "sparse":
            return -(distance >= self.distance_threshold).astype(np.float32)
        return -distance.astype(np.float32)


def register_envs() -> None:
    register_all_ids()


def point_expert(gain: float = 1.0):
    """Head straight for the goal."""

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        delta = (obs["desired_goal"] - obs["observation"]) / 0.1
        return np.clip(delta * gain, -1.0, 1.0).astype(np.float32)

    return act
