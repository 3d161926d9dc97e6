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
