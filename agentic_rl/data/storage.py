"""What an algorithm's storage is to the training loop (see ``algos.base``).

The loop writes every env step into the storage the algorithm declared (``make_storage``),
asks it how many gradient updates the new steps owe and for a batch per update, and saves it
with the run. Storages own what differs between algorithm families: replay with HER, demos and
prototypes; Manager periods; on-policy rollouts (``data.rollout_storage.RolloutStorage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from agentic_rl.envs.goal import GoalFunctions


@dataclass(frozen=True)
class StorageSpec:
    """The run facts a storage is built from (the algorithm adds its own hyper-parameters)."""

    num_envs: int
    buffer_size: int  # transitions kept in total (``training.buffer_size``)
    horizon: int  # the env's episode step limit
    learning_starts: int  # env steps before the first update
    goal_fns: GoalFunctions
    seed: int
    task_id: str = ""  # the curriculum stage at the start
    env_name: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    goal_region: Any = None
    total_timesteps: int = 0  # the run's env-step budget (schedules over training)


@dataclass
class StepRecord:
    """One env step of ``N`` envs as the loop hands it to a storage.

    ``transition`` holds ``[N, ...]`` tensors (``obs``, ``achieved_goal``, ``desired_goal``,
    ``action`` as the learner stores it, ``reward``, ``next_obs``, ``next_achieved_goal``,
    ``terminated``); ``extras`` is what ``act`` returned with the action; ``episode_end [N]``
    marks terminated or truncated envs, ``finished`` their ``FinishedEpisode`` summaries and
    ``next_obs`` the observations the envs start their next step from (reset where ended).
    ``obs`` is every observation part ``act`` saw (with ``is_first [N]`` and, where the env
    reports one, ``action_mask [N, A]``) and ``reached`` every part of the observation the step
    reached (the true final one where an episode ended).
    """

    transition: dict[str, torch.Tensor]
    extras: dict[str, torch.Tensor]
    episode_end: torch.Tensor
    finished: list
    next_obs: dict[str, torch.Tensor]
    obs: dict[str, torch.Tensor]
    reached: dict[str, torch.Tensor]


@runtime_checkable
class Storage(Protocol):
    """The loop's side of a storage.

    With rollout workers (``training.rollout_workers``) the loop also calls
    ``abandon(envs [N] bool)`` when a worker dies (its envs' episodes in progress will never
    finish), and reads an optional ``steps_per_update`` (steps per env between updates) that
    makes the workers collect exactly one update's worth with the latest weights (on-policy)."""

    warm: bool  # holds data before the first step (demos): no random-action phase

    def add(self, step: StepRecord) -> list[Any]:
        """Store one step; returns the finished episodes for ``algo.observe``."""
        ...

    def owed(self, env_steps: int, new_steps: int) -> list[Any]:
        """Sample requests owed after ``new_steps`` more env steps (``env_steps`` in total);
        each becomes one ``sample`` and one ``algo.update``."""
        ...

    def sample(self, request: Any, generator: torch.Generator) -> Any:
        """The batch for one update."""
        ...

    def metrics(self) -> dict[str, float]:
        """Statistics for the training log (e.g. skill success rates)."""
        ...

    def set_task(self, task_id: str, finished_stage: list[dict[str, torch.Tensor]]) -> None:
        """The curriculum moved to ``task_id``; ``finished_stage`` holds the successful
        evaluation episodes of the stage just passed (fields ``[L, ...]``)."""
        ...

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, JSON-able meta)``: everything stored, for a checkpoint."""
        ...

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   exact: bool) -> None:
        """Inverse of ``state``; ``exact=False`` (a checkpoint taken mid-episode) drops the
        episodes the checkpoint cut."""
        ...
