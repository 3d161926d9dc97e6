"""Continuous mazes from gymnasium-robotics behind a goal-conditioned interface (SPEC E3).

The point (``PointMaze_<layout>-v3``) and ant (``AntMaze_<layout>-v5``) mazes of
``registration.MAZE_LAYOUTS`` already return dict observations (``observation``,
``achieved_goal``, ``desired_goal``). ``GoalMaze`` adds what the rest of the framework
expects from a goal-conditioned env: a vectorised ``compute_reward`` and ``is_success`` (goal
within ``SUCCESS_RADIUS``), ``info["is_success"]`` on every step, and float32 observations.
``continuing_task=False`` by default, so success terminates the episode.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentic_rl.envs.registration import MAZE_IDS
from agentic_rl.envs.registration import register_envs as register_all_ids

with contextlib.redirect_stderr(io.StringIO()):  # a notice about Adroit envs we never use
    import gymnasium_robotics

SUCCESS_RADIUS = 0.45  # gymnasium-robotics' own goal radius (maze_v4.py)



def is_success(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """``||achieved - desired|| <= SUCCESS_RADIUS`` over the last axis, ``[...]`` bool."""
    return np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1) <= (
        SUCCESS_RADIUS
    )


def torso_up_z(quaternion: np.ndarray) -> float:
    """World z of the torso's own up axis for a MuJoCo quaternion ``(w, x, y, z)``: 1 upright,
    below 0 once the ant has turned onto its back."""
    _, x, y, _ = quaternion
    return float(1.0 - 2.0 * (x * x + y * y))


class GoalMaze(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Goal-conditioned view of a gymnasium-robotics maze (float32 dict observations)."""

    def __init__(self, env: gym.Env, reward_type: str = "sparse",
                 observe_position: bool = False, terminate_when_unhealthy: bool = False,
                 terminate_when_flipped: bool = False) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, reward_type=reward_type, observe_position=observe_position,
            terminate_when_unhealthy=terminate_when_unhealthy,
            terminate_when_flipped=terminate_when_flipped)
        gym.Wrapper.__init__(self, env)
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        for key, wanted in (("terminate_when_unhealthy", terminate_when_unhealthy),
                            ("terminate_when_flipped", terminate_when_flipped)):
            if wanted and not hasattr(env.unwrapped, "ant_env"):
                raise ValueError(f"{key}: only the ant has a torso that can leave its healthy "
                                 "range or turn over; drop it for "
                                 f"{env.spec.id if env.spec else type(env.unwrapped).__name__}")
        self.reward_type, self.observe_position = reward_type, observe_position
        self.fails_unhealthy, self.fails_flipped = terminate_when_unhealthy, terminate_when_flipped
        # goal.goal_functions reads these to relabel terminations as the env ends episodes.
        self.terminates_on_success = not env.unwrapped.continuing_task
        self.terminates_on_failure = terminate_when_unhealthy or terminate_when_flipped
        boxes = dict(env.observation_space.spaces)
        if observe_position:  # the ant's observation leaves out its own (x, y)
            inner, position = boxes["observation"], boxes["achieved_goal"]
            boxes["observation"] = spaces.Box(
                np.concatenate([inner.low, position.low]).astype(np.float32),
                np.concatenate([inner.high, position.high]).astype(np.float32), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                key: spaces.Box(
                    space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32
                )
                for key, space in boxes.items()
            }
        )

    def _cast(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        obs = {key: np.asarray(value, dtype=np.float32) for key, value in obs.items()}
        if self.observe_position:
            obs["observation"] = np.concatenate([obs["observation"], obs["achieved_goal"]])
        return obs

    def compute_reward(self, achieved_goal, desired_goal, info: Any) -> np.ndarray:
        """Vectorised reward ``[...]``: sparse 1/0 success, or dense ``exp(-distance)``."""
        if self.reward_type == "sparse":
            return is_success(achieved_goal, desired_goal).astype(np.float32)
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return np.exp(-distance).astype(np.float32)

    def compute_success(self, achieved_goal, desired_goal) -> np.ndarray:
        """Vectorised success ``[...]`` bool (what ends the episode unless continuing)."""
        return is_success(achieved_goal, desired_goal)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs = self._cast(obs)
        info["is_success"] = bool(is_success(obs["achieved_goal"], obs["desired_goal"]))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = self._cast(obs)
        info["is_success"] = bool(is_success(obs["achieved_goal"], obs["desired_goal"]))
        if self.terminates_on_failure:  # a failure: the goal was not reached
            ant = self.env.unwrapped.ant_env
            if self.fails_unhealthy and not ant.is_healthy:
                info["unhealthy"], terminated = True, True
            if self.fails_flipped and torso_up_z(ant.data.qpos[3:7]) < 0:
                info["flipped"], terminated = True, True
        return obs, float(reward), bool(terminated), bool(truncated), info


def make_maze(
    name: str,
    continuing_task: bool = False,
    reward_type: str = "sparse",
    max_episode_steps: int | None = None,
    observe_position: bool = False,
    terminate_when_unhealthy: bool = False,
    terminate_when_flipped: bool = False,
    **kwargs: Any,
) -> GoalMaze:
    """Build a goal-conditioned maze.

    Args:
        name: a gymnasium-robotics id from ``MAZE_IDS`` values (``"PointMaze_UMaze-v3"``, ...).
        continuing_task: keep going after success (gymnasium-robotics' default); False ends it.
        reward_type: ``"sparse"`` or ``"dense"``.
        max_episode_steps: step limit; None keeps the registered one.
        observe_position: append ``achieved_goal`` (the agent's x, y) to ``observation``, for
            the ant, whose observation leaves its position out.
        terminate_when_unhealthy: the ant only: end the episode, as a failure, at a step whose
            torso height leaves Ant-v5's healthy range (0.2 to 1.0): a jump, the start of most
            flips onto the ant's back, after which the ant crawls (AntMaze itself ignores it).
        terminate_when_flipped: the ant only: end the episode, as a failure, at a step whose
            torso's up axis points below the horizon: the ant has turned onto its back, which
            with a bounded Worker happens mostly by rolling, inside the healthy height range.
        **kwargs: passed to the underlying env (e.g. ``maze_map``, ``render_mode``).
    """
    if name not in MAZE_IDS.values():
        raise ValueError(f"unknown maze {name!r}; choose one of {sorted(MAZE_IDS.values())}")
    gym.register_envs(gymnasium_robotics)
    extra = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    env = gym.make(
        name, continuing_task=continuing_task, reward_type=reward_type, **extra, **kwargs
    )
    return GoalMaze(env, reward_type=reward_type, observe_position=observe_position,
                    terminate_when_unhealthy=terminate_when_unhealthy,
                    terminate_when_flipped=terminate_when_flipped)


def register_maze_envs() -> None:
    """Register ``agentic_rl/<maze id>`` for each maze (idempotent)."""
    register_all_ids()
