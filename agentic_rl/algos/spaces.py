"""What a learner is built from: the torch device and the env's spaces."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.envs.goal import is_goal_env
from agentic_rl.envs.make import EnvError


def resolve_device(name: str) -> str:
    """``training.device`` as a torch device name (``auto``: CUDA where torch sees one)."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("training.device is 'cuda' but torch sees no CUDA device; use "
                           "training.device=cpu or auto")
    return name


def spaces_of(env: gym.Env) -> dict[str, Any]:
    """Dimensions and action bounds of a goal env with a Box action space."""
    space = env.observation_space
    if not is_goal_env(env) or not isinstance(env.action_space, gym.spaces.Box):
        raise EnvError(f"this learner needs a Box (or goal Dict) observation space and a Box "
                       f"action space; {env.spec.id if env.spec else env} has {space} and "
                       f"{env.action_space} (use ppo or hgpo for discrete actions)")
    return {"obs_dim": int(np.prod(space["observation"].shape)),
            "goal_dim": int(np.prod(space["desired_goal"].shape)),
            "act_dim": int(np.prod(env.action_space.shape)),
            "action_low": env.action_space.low, "action_high": env.action_space.high}


def shrunk_box(low: Any, high: Any, share: float) -> tuple[np.ndarray, np.ndarray]:
    """``[low, high]`` shrunk about its centre to ``share`` of its width (``share`` in (0, 1]).

    A policy bound, not an env change: e.g. a Worker that may use 0.2 of Gymnasium's ant
    torque (gear 150) acts within HIRO's ant's torque limit (30).
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"an action bound is a share of the env's range in (0, 1], got {share}")
    low, high = np.asarray(low, dtype=np.float32), np.asarray(high, dtype=np.float32)
    if share == 1.0:  # exactly the env's box, whatever the rounding of centre +- half
        return low, high
    centre, half = 0.5 * (low + high), 0.5 * (high - low)
    return centre - share * half, centre + share * half


class ActionBox:
    """Maps actions between [-1, 1] (inside a learner) and an env's Box ``[low, high]``."""

    def __init__(self, low: Any, high: Any) -> None:
        self.low = torch.as_tensor(low, dtype=torch.float32)
        self.high = torch.as_tensor(high, dtype=torch.float32)
        # to_env as one multiply-add: low + (a + 1) (high - low) / 2 = offset + a * scale
        self.scale = 0.5 * (self.high - self.low)
        self.offset = self.low + self.scale

    def to_env(self, unit: torch.Tensor) -> torch.Tensor:
        """[-1, 1] actions -> the env's box."""
        return torch.addcmul(self.offset, unit, self.scale)

    def to_unit(self, action: torch.Tensor) -> torch.Tensor:
        """Inverse of ``to_env`` (e.g. for demonstrations recorded in env units)."""
        return 2.0 * (action - self.low) / (self.high - self.low) - 1.0


def flat_learner_from_config(cls: type, config: Any, env: gym.Env) -> Any:
    """``cls(algorithm, spaces, device, clip_obs, normalize)`` for an experiment config:
    how the flat learners (SAC, OPD, TD3) are built."""
    env_cfg = config.environment
    return cls(config.algorithm, spaces_of(env),
               resolve_device(config.training.device), env_cfg.clip_obs,
               (env_cfg.normalize_obs, env_cfg.normalize_goal))
