"""Goal-conditioned interface (SPEC E1): dict observations and reward/success functions.

Every goal env here has dict observations ``observation``, ``achieved_goal``, ``desired_goal``.
``GoalFunctions`` turns the env's own ``compute_reward`` into tensor functions that hindsight
relabelling calls on whole batches; for the distance-threshold envs of gymnasium-robotics the
same formula is applied directly on tensors (checked against ``compute_reward`` in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

TensorFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


@dataclass(frozen=True)
class GoalFunctions:
    """Reward and success of ``(achieved_goal [B, g], desired_goal [B, g])`` as tensors ``[B]``.

    ``terminates_on_success`` says whether reaching the goal ends the episode, so relabelled
    transitions get ``terminated = success``; ``terminates_on_failure`` whether the env also
    ends episodes that did not reach it (e.g. an ant that left its healthy range), which a
    relabelling by success alone would erase.
    """

    reward_fn: TensorFn
    success_fn: TensorFn
    terminates_on_success: bool = False
    terminates_on_failure: bool = False


def is_goal_env(env: gym.Env) -> bool:
    space = env.observation_space
    return isinstance(space, gym.spaces.Dict) and all(k in space.spaces for k in GOAL_KEYS)


def wrapper_attr(env: gym.Env, name: str, default=None):
    """``name`` from the outermost wrapper (or the base env) that defines it, else ``default``
    (wrappers such as ``mazes.GoalMaze`` add the goal attributes their base env lacks)."""
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        return default


def goal_functions(env: gym.Env) -> GoalFunctions:
    """Build tensor reward/success functions for a goal env."""
    base = env.unwrapped
    threshold = wrapper_attr(env, "distance_threshold")
    reward_type = wrapper_attr(env, "reward_type")
    terminates = bool(wrapper_attr(env, "terminates_on_success", False))
    fails = bool(wrapper_attr(env, "terminates_on_failure", False))
    if threshold is not None and reward_type in ("sparse", "dense"):
        def success_fn(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
            return (torch.linalg.vector_norm(achieved - desired, dim=-1) < threshold).float()

        if reward_type == "sparse":
            def reward_fn(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
                return success_fn(achieved, desired) - 1.0
        else:
            def reward_fn(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
                return -torch.linalg.vector_norm(achieved - desired, dim=-1)
        return GoalFunctions(reward_fn, success_fn, terminates, fails)

    compute_reward = wrapper_attr(env, "compute_reward")
    compute_success = wrapper_attr(env, "compute_success")

    def numpy_reward(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
        reward = compute_reward(achieved.numpy(), desired.numpy(), {})
        return torch.as_tensor(np.asarray(reward, dtype=np.float32))

    def numpy_success(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
        if compute_success is None:
            raise ValueError(f"{type(base).__name__} has no compute_success; HER cannot relabel "
                             "'terminated' for it")
        return torch.as_tensor(np.asarray(compute_success(achieved.numpy(), desired.numpy()),
                                          np.float32))

    return GoalFunctions(numpy_reward, numpy_success, terminates, fails)


class FlatToGoalObservation(gym.ObservationWrapper):
    """Present a plain ``Box`` env as a goal env with empty goals, so one loop serves both."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        empty = gym.spaces.Box(-np.inf, np.inf, (0,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": env.observation_space, "achieved_goal": empty, "desired_goal": empty})

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        empty = np.zeros(0, dtype=np.float32)
        return {"observation": observation, "achieved_goal": empty, "desired_goal": empty}


class GoalRegion(gym.Wrapper):
    """Resample a robotics env's goal at reset until it lies in ``[low, high]`` and outside
    every box in ``exclude`` (e.g. goals only where a safety property allows them).

    Uses gymnasium-robotics' ``_sample_goal`` / ``_get_obs``; draws come from the env's own
    seeded generator, so seeded resets stay reproducible.
    """

    def __init__(self, env: gym.Env, low=None, high=None, exclude=(), max_draws: int = 1000):
        super().__init__(env)
        base = env.unwrapped
        if not (hasattr(base, "_sample_goal") and hasattr(base, "_get_obs")):
            raise ValueError(f"environment.goal_region needs a gymnasium-robotics env; "
                             f"{type(base).__name__} has no _sample_goal/_get_obs")
        self.low = None if low is None else np.asarray(low, dtype=np.float64)
        self.high = None if high is None else np.asarray(high, dtype=np.float64)
        self.exclude = [(np.asarray(lo, np.float64), np.asarray(hi, np.float64))
                        for lo, hi in exclude]
        self.max_draws = max_draws

    def allowed(self, goal: np.ndarray) -> bool:
        inside = ((self.low is None or (goal >= self.low).all())
                  and (self.high is None or (goal <= self.high).all()))
        return inside and not any(((goal >= lo) & (goal <= hi)).all() for lo, hi in self.exclude)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        base = self.env.unwrapped
        for _ in range(self.max_draws):
            if self.allowed(base.goal):
                return base._get_obs(), info
            base.goal = base._sample_goal()
        raise RuntimeError(f"no goal inside environment.goal_region after {self.max_draws} "
                           "draws; widen the region")
