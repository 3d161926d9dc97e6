"""The on-policy storage of the training loop: one rollout of ``rollout_steps`` steps of every
env, handed whole to one ``algo.update`` (GAE happens there), then refilled.

It keeps what ``algo.act`` saw (every observation part, with ``is_first`` and ``action_mask``),
the true next observation (the final one where an episode ended), ``terminated`` and
``truncated`` apart, and the extras ``act`` returned (log-probabilities, values, HGPO's goals).
A checkpoint saves the partly filled rollout, so a run resumed from an exact checkpoint
continues it; one taken mid-episode (``exact=False``) starts a fresh rollout instead, since
the cut episodes do not continue.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentic_rl.data.checkpoint import prefixed, with_prefix
from agentic_rl.data.rollout import Rollout, RolloutBuffer
from agentic_rl.data.storage import StepRecord

STORED_ACTION = "unit_action"  # the extra kept as ``Rollout.actions``, not among the extras


class RolloutStorage:
    """``Storage`` (``data.storage``) for PPO-style learners.

    Args:
        rollout_steps: steps per env between updates (``T``).
    """

    warm = True  # on-policy: no random-action phase before learning

    def __init__(self, rollout_steps: int) -> None:
        self.buffer = RolloutBuffer(rollout_steps)

    def add(self, step: StepRecord) -> list:
        if self.buffer.full:  # the last update has used it
            self.buffer.reset()
        terminated = step.transition["terminated"].bool()
        self.buffer.add(step.obs, step.reached, step.transition["action"],
                        step.transition["reward"], terminated, step.episode_end & ~terminated,
                        {k: v for k, v in step.extras.items() if k != STORED_ACTION})
        return []

    def owed(self, env_steps: int, new_steps: int) -> list[None]:
        return [None] if self.buffer.full else []

    def sample(self, request: None, generator: torch.Generator) -> Rollout:
        return self.buffer.get()

    def metrics(self) -> dict[str, float]:
        return {}

    @property
    def steps_per_update(self) -> int:
        """Steps per env between updates: rollout workers collect exactly this many with the
        latest weights."""
        return self.buffer.num_steps

    def abandon(self, envs: np.ndarray) -> None:
        """The episodes in progress in ``envs`` (``[N]`` bool) will never finish: the rollout
        so far ends them as truncated at their last stored step (bootstrapped from the state
        that step reached), so no advantage runs into the next, unrelated episode."""
        buffer = self.buffer
        if buffer._data is None or buffer.step == 0 or buffer.full:
            return  # nothing of theirs is waiting for an update
        buffer._data.truncated[buffer.step - 1] |= torch.from_numpy(np.asarray(envs, dtype=bool))

    def set_task(self, task_id: str, finished_stage: list) -> None:
        """A curriculum stage changes the env only; rollouts are never reused across updates."""

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        data = self.buffer._data
        if data is None:
            return {}, {"step": 0}
        arrays = {"actions": data.actions, "rewards": data.rewards,
                  "terminated": data.terminated, "truncated": data.truncated}
        for name in ("obs", "next_obs", "extras"):
            arrays |= with_prefix(getattr(data, name), name)
        return {k: v.numpy() for k, v in arrays.items()}, {"step": self.buffer.step}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   exact: bool) -> None:
        if not arrays:
            return
        tensors = {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}
        parts = {name: prefixed(tensors, name) for name in ("obs", "next_obs", "extras")}
        self.buffer._data = Rollout(parts["obs"], parts["next_obs"], tensors["actions"],
                                    tensors["rewards"], tensors["terminated"],
                                    tensors["truncated"], parts["extras"])
        self.buffer.step = int(meta["step"]) if exact else 0
