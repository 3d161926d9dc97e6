"""The best episodes an on-policy learner has finished, kept for self-imitation.

Rollouts ``[T, N, ...]`` cut episodes anywhere, so each env's unfinished rows wait here until
its episode ends. A finished episode with a positive env return competes for one of
``capacity`` places, ranked by return and then by length (shorter first): on a sparse task
that ends on success these are the shortest successes seen so far. The rows keep whatever the
learner asks for (inputs, goals, actions); ``sample`` draws transitions uniformly from the kept
episodes, optionally only the rows where a boolean field is set (a Manager's decisions).
"""

from __future__ import annotations

from typing import Any

import torch


class EliteEpisodes:
    """Top-``capacity`` finished episodes by ``(return, -length)``; ties keep the earlier one."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.episodes: list[dict[str, torch.Tensor]] = []  # each row field [L, ...]
        self.returns: list[float] = []
        self.pending: dict[int, dict[str, torch.Tensor]] = {}  # env -> unfinished rows [l, ...]
        self.pending_return: dict[int, float] = {}
        # the kept rows, concatenated, all of them (key None) or where a flag is set
        self._flat: dict[str | None, dict[str, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.episodes)

    def add_rollout(self, rows: dict[str, torch.Tensor], rewards: torch.Tensor,
                    dones: torch.Tensor, starts: torch.Tensor | None = None) -> int:
        """Append a rollout: ``rows`` fields ``[T, N, ...]``, env ``rewards [T, N]``, ``dones
        [T, N]`` (terminated or truncated) and optionally ``starts [T, N]`` (the row begins an
        episode: unfinished rows before it belong to an episode that was dropped, e.g. an env
        restarted without an end, and are discarded). Returns how many episodes were kept."""
        kept, steps = 0, rewards.shape[0]
        for env in range(rewards.shape[1]):
            start = 0
            begins = set() if starts is None else set(starts[:, env].nonzero().flatten().tolist())
            ends = set(dones[:, env].nonzero().flatten().tolist())
            for t in sorted(begins | ends):
                if t in begins:  # rows before it that no end closed are dropped
                    self.pending.pop(env, None)
                    self.pending_return.pop(env, None)
                    start = t
                if t in ends:
                    kept += self._finish(env, self._extend(env, rows, rewards, start, t + 1))
                    start = t + 1
            if start < steps:
                self._extend(env, rows, rewards, start, steps)
        return kept

    def _extend(self, env: int, rows, rewards, start: int, stop: int) -> dict[str, torch.Tensor]:
        chunk = {k: v[start:stop, env].detach().clone() for k, v in rows.items()}
        before = self.pending.get(env)
        self.pending[env] = chunk if before is None else {
            k: torch.cat([before[k], chunk[k]]) for k in chunk}
        self.pending_return[env] = self.pending_return.get(env, 0.0) + float(
            rewards[start:stop, env].sum())
        return self.pending[env]

    def _finish(self, env: int, episode: dict[str, torch.Tensor]) -> bool:
        episode_return = self.pending_return.pop(env)
        del self.pending[env]
        if episode_return <= 0:
            return False
        rank = sum(1 for r, e in zip(self.returns, self.episodes)
                   if (r, -_length(e)) >= (episode_return, -_length(episode)))
        if rank >= self.capacity:
            return False
        self.episodes.insert(rank, episode)
        self.returns.insert(rank, episode_return)
        del self.episodes[self.capacity:], self.returns[self.capacity:]
        self._flat.clear()
        return True

    def sample(self, batch_size: int, generator: torch.Generator,
               where: str | None = None) -> dict[str, torch.Tensor]:
        """``batch_size`` rows ``[B, ...]`` drawn uniformly (with replacement) from the kept
        episodes' rows, or from those whose boolean field ``where`` is set; empty: ``{}``."""
        if not self.episodes:
            return {}
        flat = self._rows(where)
        size = _length(flat)
        if size == 0:
            return {}
        index = torch.randint(size, (batch_size,), generator=generator,
                              device=generator.device).to(next(iter(flat.values())).device)
        return {k: v[index] for k, v in flat.items()}

    def _rows(self, where: str | None) -> dict[str, torch.Tensor]:
        """The kept rows concatenated (``where``: only those with the flag set), built once
        per change of the kept episodes, not per draw."""
        if where not in self._flat:
            if None not in self._flat:
                self._flat[None] = {k: torch.cat([e[k] for e in self.episodes])
                                    for k in self.episodes[0]}
            every = self._flat[None]
            self._flat[where] = every if where is None else {
                k: v[every[where].bool()] for k, v in every.items()}
        return self._flat[where]

    def stats(self) -> dict[str, float]:
        if not self.episodes:
            return {"train/elite_episodes": 0.0}
        lengths = [_length(e) for e in self.episodes]
        return {"train/elite_episodes": float(len(self.episodes)),
                "train/elite_best_return": self.returns[0],
                "train/elite_mean_length": sum(lengths) / len(lengths)}

    def state(self) -> dict[str, Any]:
        """Everything, as nested lists / dicts of tensors and floats (checkpoint-ready)."""
        return {"episodes": self.episodes, "returns": self.returns,
                "pending": {str(k): v for k, v in self.pending.items()},
                "pending_return": {str(k): v for k, v in self.pending_return.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.episodes = [dict(e) for e in state["episodes"]]
        self.returns = [float(r) for r in state["returns"]]
        self.pending = {int(k): dict(v) for k, v in state["pending"].items()}
        self.pending_return = {int(k): float(v) for k, v in state["pending_return"].items()}
        self._flat.clear()


def _length(rows: dict[str, torch.Tensor]) -> int:
    """Rows in an episode (or any dict of row fields ``[L, ...]``)."""
    return len(next(iter(rows.values())))
