"""Step a vector env with a policy, keep ``terminated`` and ``truncated`` apart, reset finished
envs with seeds from the run's generator, and hand back transitions and finished episodes.

The vector env runs without autoreset, so the observation after the last step of an episode is
the real final observation (no ``final_obs`` juggling), and every reset is seeded: a run resumed
from a checkpoint taken between episodes replays exactly the same episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from agentic_rl.data.storage import StepRecord

EVAL_SEED_OFFSET = 1_000_000  # evaluation episodes never share seeds with training episodes


def to_tensors(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Copies (the vector env hands out its own buffers, overwritten by the next step):
    float32, except integer parts (e.g. text row ids), which stay int64."""
    return {k: _int_tensor(v) if np.asarray(v).dtype.kind in "iu" else _float_tensor(v)
            for k, v in obs.items()}


def _int_tensor(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(values).astype(np.int64))


def with_action_mask(obs: dict[str, torch.Tensor], info: dict, previous: torch.Tensor | None = None,
                     rows: np.ndarray | None = None) -> dict[str, torch.Tensor]:
    """``obs`` plus ``action_mask [N, A]`` bool where the env reports one in ``info``; after a
    reset of ``rows`` only those rows are new (the others keep ``previous``)."""
    if "action_mask" not in info:
        return obs
    mask = torch.from_numpy(np.asarray(info["action_mask"]).astype(bool))
    if previous is not None and rows is not None:
        mask = torch.where(torch.from_numpy(rows)[:, None], mask, previous)
    return {**obs, "action_mask": mask}


def _float_tensor(values: np.ndarray) -> torch.Tensor:
    """A float32 copy; ``astype`` then ``from_numpy`` is a third of ``torch.as_tensor``'s cost."""
    return torch.from_numpy(np.asarray(values).astype(np.float32))


@dataclass
class FinishedEpisode:
    """Summary of one finished episode of env ``env_index`` (its steps are in the replay)."""

    env_index: int
    success: bool
    episode_return: float
    length: int


class Collector:
    """Owns the envs' current observations, episode seeds, returns and lengths."""

    def __init__(self, envs, rng: np.random.Generator) -> None:
        self.envs, self.rng = envs, rng
        self.num_envs = envs.num_envs
        self.obs: dict[str, torch.Tensor] = {}  # [N, ...] each, plus action_mask if reported
        self.reached: dict[str, torch.Tensor] = {}  # the last step's observations, before resets
        self.episode_seeds = np.zeros(self.num_envs, dtype=np.int64)
        self.steps_in_episode = np.zeros(self.num_envs, dtype=np.int64)
        self.returns = np.zeros(self.num_envs, dtype=np.float64)
        self._pending_action: np.ndarray | None = None

    def reset_all(self, seeds: np.ndarray | None = None) -> dict[str, torch.Tensor]:
        """Reset every env, with ``seeds`` (e.g. from a checkpoint) or fresh ones."""
        if seeds is None:
            seeds = self.rng.integers(0, 2**31 - 1, self.num_envs)
        self.episode_seeds = np.asarray(seeds, dtype=np.int64)
        obs, info = self.envs.reset(seed=[int(s) for s in self.episode_seeds])
        self.obs = with_action_mask(to_tensors(obs), info)
        self.steps_in_episode[:] = 0
        self.returns[:] = 0.0
        return self.obs

    @property
    def at_episode_boundary(self) -> bool:
        """True when every env has just been reset (a checkpoint here resumes exactly)."""
        return bool((self.steps_in_episode == 0).all())

    @property
    def is_first(self) -> torch.Tensor:
        """``[N]`` bool: the env has just been reset (its episode's first step comes next)."""
        return torch.from_numpy(self.steps_in_episode == 0)

    def policy_obs(self) -> dict[str, torch.Tensor]:
        """What ``act`` sees: the current observations with ``is_first [N]``."""
        return {**self.obs, "is_first": self.is_first}

    def record(self, transition: dict[str, torch.Tensor], extras: dict[str, torch.Tensor],
               episode_end: np.ndarray, finished: list, obs: dict[str, torch.Tensor]
               ) -> StepRecord:
        """The ``StepRecord`` of the step just taken from ``obs`` (what ``act`` saw)."""
        return StepRecord(transition, extras, episode_end, finished, self.obs, obs,
                          self.reached)

    def step(self, env_action: torch.Tensor, stored_action: torch.Tensor):
        """Advance every env by one step.

        Args:
            env_action: ``[N, act_dim]`` in env units.
            stored_action: ``[N, act_dim]`` what the learner stores (its [-1, 1] action).

        Returns:
            ``(transition, episode_end [N] bool, finished episodes)``; transition fields are
            ``[N, ...]`` tensors: ``action``, ``reward``, ``terminated``, and for goal envs the
            rest of ``agentic_rl.data.replay.FIELDS`` (other envs' observations reach the
            storage whole, through ``StepRecord.obs`` / ``reached``).
        """
        self.step_async(env_action)
        return self.step_wait(stored_action)

    def step_async(self, env_action: torch.Tensor) -> None:
        """Start the step: envs in worker processes (``AsyncVectorEnv``) run it while the
        caller works; in-process envs run it in ``step_wait``."""
        if hasattr(self.envs, "step_async"):
            self.envs.step_async(env_action.numpy())
            self._pending_action = None
        else:
            self._pending_action = env_action.numpy()

    def step_wait(self, stored_action: torch.Tensor):
        """Finish the step started by ``step_async``; returns what ``step`` returns."""
        if self._pending_action is None:
            next_obs, reward, terminated, truncated, info = self.envs.step_wait()
        else:
            next_obs, reward, terminated, truncated, info = self.envs.step(self._pending_action)
        next_obs_t = with_action_mask(to_tensors(next_obs), info)
        transition = {"action": stored_action, "reward": _float_tensor(reward),
                      "terminated": _float_tensor(terminated)}
        if "achieved_goal" in next_obs_t:  # goal envs: the fields replay and HER read
            transition |= {
                "obs": self.obs["observation"], "achieved_goal": self.obs["achieved_goal"],
                "desired_goal": self.obs["desired_goal"], "next_obs": next_obs_t["observation"],
                "next_achieved_goal": next_obs_t["achieved_goal"]}
        episode_end = np.logical_or(terminated, truncated)
        self.steps_in_episode += 1
        self.returns += reward
        self.obs = self.reached = next_obs_t
        finished = []
        if episode_end.any():
            success = np.asarray(info.get("is_success", np.zeros(self.num_envs)), dtype=bool)
            finished = [FinishedEpisode(env, bool(success[env]), float(self.returns[env]),
                                        int(self.steps_in_episode[env]))
                        for env in np.flatnonzero(episode_end)]
            self._reset_finished(episode_end)
        return transition, torch.from_numpy(episode_end), finished

    def _reset_finished(self, mask: np.ndarray) -> None:
        seeds = self.rng.integers(0, 2**31 - 1, self.num_envs)
        self.episode_seeds[mask] = seeds[mask]
        obs, info = self.envs.reset(seed=[int(s) if m else None for s, m in zip(seeds, mask)],
                                    options={"reset_mask": mask})
        # envs outside the mask keep their current observation
        self.obs = with_action_mask(to_tensors(obs), info, self.obs.get("action_mask"), mask)
        self.steps_in_episode[mask] = 0
        self.returns[mask] = 0.0
