"""Ring-buffer replay with an episode index, for off-policy learners (SPEC A1, A2).

Storage is a set of preallocated tensors shaped ``[capacity, num_envs, ...]``: column ``e``
holds env ``e``'s transitions in time order, so an episode is a contiguous (wrapping) run of
rows. ``episode_length`` is written once the episode ends; only finished episodes are sampled,
which lets hindsight relabelling look at any later step of the same episode.
"""

from __future__ import annotations

import numpy as np
import torch

from agentic_rl.data.her import RewardFn, relabel_offsets
from agentic_rl.data.priorities import Priorities

FIELDS = ("obs", "achieved_goal", "desired_goal", "action", "reward", "next_obs",
          "next_achieved_goal", "terminated")


class ReplayBuffer:
    """Transitions of ``num_envs`` parallel envs; sampling with optional HER relabelling.

    Args:
        capacity: rows per env column.
        num_envs: parallel envs written per ``add``.
        shapes: per-field feature shape, e.g. ``{"obs": (10,), "action": (4,), ...}``; scalars
            (``reward``, ``terminated``) use ``()``. Fields beyond ``FIELDS`` (a learner's
            own, e.g. ``hgpo_sac``'s ``missed``) are stored, sampled and saved alike.
    """

    def __init__(self, capacity: int, num_envs: int, shapes: dict[str, tuple[int, ...]]):
        self.capacity, self.num_envs = capacity, num_envs
        self.fields = FIELDS + tuple(sorted(set(shapes) - set(FIELDS)))
        self.storage = {name: torch.zeros((capacity, num_envs, *shapes.get(name, ())))
                        for name in self.fields}
        self.episode_start = torch.zeros((capacity, num_envs), dtype=torch.long)
        self.episode_length = torch.zeros((capacity, num_envs), dtype=torch.long)
        self.current_start = torch.zeros(num_envs, dtype=torch.long)
        self.pos, self.full = 0, False
        self._valid: torch.Tensor | None = None  # flat indices of sampleable rows (cached)
        # [capacity * num_envs, ...] views: a flat index row * num_envs + env gathers a row
        # with one index_select (the storage is written in place, never reallocated)
        self._flat = {name: self.storage[name].flatten(0, 1) for name in self.fields}
        self._flat_start = self.episode_start.view(-1)
        self._flat_length = self.episode_length.view(-1)
        # numpy views of the same memory for ``add``: a step's writes and episode bookkeeping
        # are a dozen tiny operations, each a half to a third of the cost of the torch call
        self._np = {name: self.storage[name].numpy() for name in self.fields}
        self._np_start, self._np_length = self.episode_start.numpy(), self.episode_length.numpy()
        self._np_current = self.current_start.numpy()
        # per flat slot, for prioritised sampling (``ReplayStorage`` sets it): kept in step with
        # which slots are sampleable
        self.priorities: Priorities | None = None

    @property
    def slots(self) -> int:
        """Flat transition slots ``capacity * num_envs`` (a flat index is ``row * num_envs +
        env``)."""
        return self.capacity * self.num_envs

    def __len__(self) -> int:
        return (self.capacity if self.full else self.pos) * self.num_envs

    def num_sampleable(self) -> int:
        """Transitions of finished episodes (the only ones ``sample`` draws)."""
        return int(self.valid_indices().numel())

    def valid_indices(self) -> torch.Tensor:
        """Flat ``row * num_envs + env`` indices of finished episodes' transitions."""
        if self._valid is None:
            lengths = self.episode_length[: self._used_rows()].reshape(-1)
            self._valid = torch.nonzero(lengths > 0).flatten()
        return self._valid

    def finished_rows(self, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """``fields`` of every transition of a finished episode, each ``[K, ...]`` (in flat
        index order)."""
        index = self.valid_indices()
        return {name: self._flat[name].index_select(0, index) for name in fields}

    def _used_rows(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, transition: dict[str, torch.Tensor], episode_end: torch.Tensor) -> None:
        """Write one step of every env: fields ``[num_envs, ...]``, ``episode_end [num_envs]``
        (terminated or truncated)."""
        pos, end = self.pos, as_numpy(episode_end).astype(bool, copy=False)
        if self._np_length[pos].any() or end.any():
            self._valid = None  # an old episode is overwritten or a new one becomes sampleable
        self._forget_overwritten_episodes(pos)
        for name in self.fields:
            self._np[name][pos] = as_numpy(transition[name])
        self._np_start[pos] = self._np_current
        self._np_length[pos] = 0
        for env in np.flatnonzero(end).tolist():
            start = int(self._np_current[env])
            length = (pos - start) % self.capacity + 1
            rows = (start + np.arange(length)) % self.capacity
            self._np_length[rows, env] = length
            if self.priorities is not None:
                self.priorities.add(rows * self.num_envs + env)
        self.pos = (pos + 1) % self.capacity
        self.full = self.full or self.pos == 0
        self._np_current[end] = self.pos

    def _forget_overwritten_episodes(self, row: int) -> None:
        """Before row ``row`` is overwritten, unmark the old episodes that pass through it."""
        for env in np.flatnonzero(self._np_length[row]).tolist():
            start, length = int(self._np_start[row, env]), int(self._np_length[row, env])
            rows = (start + np.arange(length)) % self.capacity
            self._np_length[rows, env] = 0
            if self.priorities is not None:
                self.priorities.remove(rows * self.num_envs + env)

    def last_episode(self, env: int) -> dict[str, torch.Tensor]:
        """The steps ``[L, ...]`` of env ``env``'s episode that ended at the latest ``add``."""
        last = (self.pos - 1) % self.capacity
        length = int(self.episode_length[last, env])
        if length == 0:
            raise RuntimeError(f"env {env}'s latest transition did not end an episode")
        rows = (last - length + 1 + torch.arange(length)) % self.capacity
        return {name: self.storage[name][rows, env] for name in self.fields}

    def drop_unfinished(self, envs: np.ndarray | None = None) -> None:
        """Forget the episodes still running (e.g. cut by a checkpoint taken mid-episode) in
        every env or in ``envs`` (``[num_envs]`` bool): their rows stay unsampleable and each
        such env's next episode starts at the next row."""
        if envs is None:
            self.current_start[:] = self.pos
        else:
            self.current_start[torch.from_numpy(np.asarray(envs, dtype=bool))] = self.pos

    def add_episode(self, episode: dict[str, torch.Tensor]) -> None:
        """Append a whole episode (fields ``[L, ...]``) to a single-env buffer (demonstrations)."""
        if self.num_envs != 1:
            raise ValueError("add_episode needs a buffer with num_envs=1")
        length = episode["reward"].shape[0]
        for step in range(length):
            end = torch.tensor([step == length - 1])
            self.add({k: v[step : step + 1] for k, v in episode.items() if k in self.fields}, end)

    def sample(self, batch_size: int, generator: torch.Generator, her_strategy: str = "none",
               relabel_ratio: float = 0.0, reward_fn: RewardFn | None = None,
               success_fn: RewardFn | None = None, flat: torch.Tensor | None = None
               ) -> dict[str, torch.Tensor]:
        """Uniform over finished episodes' transitions (or the flat slots ``flat [B]`` drawn
        by the caller, e.g. by priority); relabel a fraction of goals.

        ``success_fn`` (only for envs that terminate on success) recomputes ``terminated`` for
        the relabelled goals. Rows with a ``failed`` field set (an env that ended the episode
        short of its goal) keep their goal: relabelled with the state the failure reached, the
        last step of a failed episode would read as a success.

        Returns:
            ``obs [B, o]``, ``action [B, a]``, ``reward [B]``, ``next_obs [B, o]``,
            ``terminated [B]``, ``desired_goal [B, g]`` (the possibly relabelled goal),
            ``achieved_goal`` and ``next_achieved_goal [B, g]``.
        """
        if flat is None:
            valid = self.valid_indices()
            if valid.numel() == 0:
                raise RuntimeError("no finished episode in the replay buffer yet; raise "
                                   "training.learning_starts above one episode length times the "
                                   "number of envs (all rollout workers' envs together)")
            flat = valid[torch.randint(valid.numel(), (batch_size,), generator=generator)]
        batch = {name: self._flat[name].index_select(0, flat) for name in self.fields}
        if her_strategy != "none" and relabel_ratio > 0:
            if reward_fn is None:
                raise ValueError("HER relabelling needs a reward_fn")
            start = self._flat_start.index_select(0, flat)
            length = self._flat_length.index_select(0, flat)
            rows = flat // self.num_envs if self.num_envs > 1 else flat
            offset = (rows - start) % self.capacity
            goal_offset = relabel_offsets(her_strategy, offset, length, generator)
            goal_flat = (start + goal_offset) % self.capacity
            if self.num_envs > 1:
                goal_flat = goal_flat * self.num_envs + flat % self.num_envs
            relabel = torch.rand(batch_size, generator=generator) < relabel_ratio
            if "failed" in batch:  # a failure stays one: never a goal reached in hindsight
                relabel &= batch["failed"] == 0
            new_goal = self._flat["next_achieved_goal"].index_select(0, goal_flat)
            batch["desired_goal"] = torch.where(relabel[:, None], new_goal, batch["desired_goal"])
            batch["reward"] = reward_fn(batch["next_achieved_goal"], batch["desired_goal"])
            if success_fn is not None:  # envs that end an episode when the goal is reached
                batch["terminated"] = success_fn(batch["next_achieved_goal"],
                                                 batch["desired_goal"]).float()
        return batch

    # ---------------------------------------------------------------------- checkpointing
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to restore the buffer, as numpy arrays for an ``.npz``."""
        used = self._used_rows()
        arrays = {f"storage.{k}": v[:used].numpy() for k, v in self.storage.items()}
        arrays.update(episode_start=self.episode_start[:used].numpy(),
                      episode_length=self.episode_length[:used].numpy(),
                      current_start=self.current_start.numpy(),
                      pointer=np.array([self.pos, int(self.full)]))
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        used = arrays["episode_start"].shape[0]
        if used > self.capacity or arrays["current_start"].shape[0] != self.num_envs:
            raise ValueError("checkpointed replay buffer does not fit this config's buffer_size "
                             "or num_envs")
        for name in self.fields:
            self.storage[name][:used] = torch.from_numpy(arrays[f"storage.{name}"])
        self.episode_start[:used] = torch.from_numpy(arrays["episode_start"])
        self.episode_length[:used] = torch.from_numpy(arrays["episode_length"])
        self.current_start[:] = torch.from_numpy(arrays["current_start"])
        self.pos, self.full = int(arrays["pointer"][0]), bool(arrays["pointer"][1])
        self._valid = None


def as_numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    """A (CPU) tensor or array as a numpy array, without a copy where possible."""
    return value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)
