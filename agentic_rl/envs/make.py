"""Build environments from config: one id namespace for Gymnasium, gymnasium-robotics and ours."""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import importlib
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from agentic_rl.envs.goal import FlatToGoalObservation, GoalRegion, is_goal_env
from agentic_rl.envs.registration import ALFWORLD_ID, register_envs

# Modules that register envs of this project (each exposes register_envs()); optional ones are
# skipped when their extra dependencies are missing.
OWN_ENV_MODULES = ("agentic_rl.envs.point", "agentic_rl.envs.gridworld", "agentic_rl.envs.mazes",
                   "agentic_rl.envs.alfworld")
_registered = False


class EnvError(ValueError):
    """An environment id or its arguments are wrong."""


def register_all(name: str | None = None) -> None:
    """Make ``name`` (or every id) known to Gymnasium (idempotent). This project's ids are
    registered on ``import agentic_rl``; gymnasium-robotics, whose import takes a second or
    two, is imported only for an id that is not ours."""
    global _registered
    register_envs()
    if _registered or (name is not None and name in gym.registry):
        return
    with contextlib.redirect_stderr(io.StringIO()):  # a notice about Adroit envs we never use
        import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    for module_name in OWN_ENV_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue  # that family or its optional dependency is not installed
        for hook in ("register_envs", "register_maze_envs"):
            if hasattr(module, hook):
                getattr(module, hook)()
    _registered = True


def check_env_id(name: str) -> None:
    """Raise ``EnvError`` (with the closest ids) unless ``name`` is a registered env id."""
    register_all(name)
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise EnvError(f"unknown environment id {name!r}{hint} (Fetch tasks are the -v4 ids, "
                       "e.g. FetchReach-v4)")


def check_text_env(name: str) -> None:
    """text_opd plays admissible-command text games: ALFWorld's env, nothing else."""
    check_env_id(name)
    if name != ALFWORLD_ID:
        raise EnvError(f"text_opd plays admissible-command text envs ({ALFWORLD_ID}); "
                       f"{name!r} is not one (use sac, opd, td3, ppo or hgpo for it)")


def make_env(name: str, kwargs: dict[str, Any] | None = None, goal_region=None) -> gym.Env:
    """``gym.make`` with a clear error for unknown ids; plain Box envs get empty goals (other
    spaces, e.g. ALFWorld's text, pass through unchanged);
    ``goal_region`` (a ``config.GoalRegionConfig``) restricts where goals are sampled."""
    check_env_id(name)
    try:
        env = gym.make(name, **(kwargs or {}))
    except TypeError as error:
        raise EnvError(f"environment {name!r} rejected environment.kwargs: {error}") from None
    if not is_goal_env(env) and isinstance(env.observation_space, gym.spaces.Box):
        env = FlatToGoalObservation(env)
    if goal_region is not None:
        env = GoalRegion(env, goal_region.low, goal_region.high, goal_region.exclude)
    return env


def env_factory(name: str, kwargs: dict[str, Any] | None = None, goal_region=None,
                wrap: Callable[[gym.Env], gym.Env] | None = None) -> Callable[[], gym.Env]:
    """A picklable-by-closure thunk for vector envs (``wrap``: applied to each env last)."""
    def make() -> gym.Env:
        env = make_env(name, kwargs, goal_region)
        return env if wrap is None else wrap(env)
    return make


class LeanSyncVectorEnv(SyncVectorEnv):
    """``SyncVectorEnv`` whose ``step``, for dict observations without autoreset, writes each
    env's arrays straight into the batch buffers instead of dispatching on the spaces to split
    the actions and join the observations; the same results, and gymnasium's ``reset``. It
    reads the buffers ``SyncVectorEnv`` keeps (gymnasium 1.x); without them it is the plain
    ``SyncVectorEnv``."""

    BUFFERS = ("_observations", "_rewards", "_terminations", "_truncations", "_autoreset_envs",
               "_env_obs")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lean = (self.autoreset_mode == AutoresetMode.DISABLED
                     and all(hasattr(self, name) for name in self.BUFFERS)
                     and isinstance(self._observations, dict))

    def step(self, actions):
        if not self.lean:
            return super().step(actions)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if self._autoreset_envs[i]:
                raise RuntimeError(f"env {i} finished its episode: reset finished envs (reset "
                                   "with options={'reset_mask': ...}) before stepping them")
            (obs, self._rewards[i], self._terminations[i], self._truncations[i],
             info) = env.step(actions[i])
            # gymnasium's reset with a reset_mask rebuilds every env's row from _env_obs
            self._env_obs[i] = obs
            for key, value in obs.items():
                self._observations[key][i] = value
            infos = self._add_info(infos, info, i)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        observations = self._observations if not self.copy else copy.deepcopy(self._observations)
        return (observations, np.copy(self._rewards), np.copy(self._terminations),
                np.copy(self._truncations), infos)


def make_vec_env(name: str, num_envs: int, kwargs: dict[str, Any] | None = None,
                 goal_region=None, wrap: Callable[[gym.Env], gym.Env] | None = None
                 ) -> gym.vector.VectorEnv:
    """A vector env without autoreset: the collector resets envs itself, with seeds drawn from
    the run's generator, so a resumed run replays the same episodes. Grid worlds step as one
    numpy batch (``BatchGridWorld``); other envs run in a ``LeanSyncVectorEnv`` whose
    observations come back in its own buffers (``copy=False``: its deep copy of every step's
    observation dict cost more than the rest of its step); the collector copies what it keeps.
    ``wrap`` wraps each env (grid worlds then step one by one too)."""
    register_all(name)
    from agentic_rl.envs.gridworld import ENV_IDS, BatchGridWorld

    if name in ENV_IDS and goal_region is None and wrap is None:
        make_env(name, kwargs).close()  # the same argument checks as a single env
        return BatchGridWorld(num_envs=num_envs, **{**ENV_IDS[name], **(kwargs or {})})
    return LeanSyncVectorEnv([env_factory(name, kwargs, goal_region, wrap)
                              for _ in range(num_envs)],
                             autoreset_mode=AutoresetMode.DISABLED, copy=False)
