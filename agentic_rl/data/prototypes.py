"""Prototype buffer (SPEC A4): behaviours the actor is distilled towards.

Prototypes are whole episodes of raw ``(obs, desired_goal, achieved_goal, action)`` with
metadata per episode: task id, success, return, timestamp and source (``expert``,
``curriculum`` for episodes of an earlier curriculum stage, ``self`` for the agent's own
successes). Sampling is uniform, prioritised by return, or restricted to the episodes whose goal
is nearest to the current goals.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

TRANSITION_FIELDS = ("obs", "desired_goal", "achieved_goal", "action")
SOURCES = ("expert", "curriculum", "self")
SAMPLERS = ("uniform", "return", "goal")


class PrototypeBuffer:
    """Episodes of prototype transitions with metadata; capacity counted in transitions.

    When full, the oldest non-expert episodes go first, then the oldest expert ones.
    """

    def __init__(self, capacity: int, sampling: str = "uniform", nearest_fraction: float = 0.1):
        if sampling not in SAMPLERS:
            raise ValueError(f"unknown prototype sampling {sampling!r}; use one of {SAMPLERS}")
        self.capacity, self.sampling, self.nearest_fraction = capacity, sampling, nearest_fraction
        self.episodes: list[dict[str, torch.Tensor]] = []
        self.metadata: list[dict[str, object]] = []
        self._flat: dict[str, torch.Tensor] | None = None

    def __len__(self) -> int:
        if self._flat is not None:
            return int(self._flat["action"].shape[0])
        return sum(int(ep["action"].shape[0]) for ep in self.episodes)

    def count(self, source: str) -> int:
        """Transitions that came from ``source``."""
        return sum(int(ep["action"].shape[0]) for ep, meta in zip(self.episodes, self.metadata)
                   if meta["source"] == source)

    def add_episode(self, episode: dict[str, torch.Tensor], source: str, task_id: str = "",
                    success: bool = True, episode_return: float = 0.0,
                    timestamp: float | None = None) -> None:
        """Add one episode; fields ``[L, ...]`` with ``action`` in the agent's [-1, 1] units."""
        if source not in SOURCES:
            raise ValueError(f"unknown prototype source {source!r}; use one of {SOURCES}")
        self.episodes.append({k: episode[k].detach().float().cpu() for k in TRANSITION_FIELDS})
        self.metadata.append({"task_id": task_id, "success": bool(success),
                              "return": float(episode_return), "source": source,
                              "timestamp": time.time() if timestamp is None else timestamp})
        self._flat = None
        while len(self) > self.capacity and len(self.episodes) > 1:
            self._evict_oldest(preferred=("self", "curriculum", "expert"))

    def cap_source(self, source: str, max_transitions: int) -> None:
        """Drop the oldest episodes of ``source`` until at most ``max_transitions`` remain."""
        while self.count(source) > max_transitions:
            self._evict_oldest(preferred=(source,))

    def _evict_oldest(self, preferred: tuple[str, ...]) -> None:
        for source in preferred:
            candidates = [i for i, meta in enumerate(self.metadata) if meta["source"] == source]
            if candidates:
                oldest = min(candidates, key=lambda i: self.metadata[i]["timestamp"])
                del self.episodes[oldest], self.metadata[oldest]
                self._flat = None
                return

    def _flatten(self) -> dict[str, torch.Tensor]:
        if self._flat is None:
            lengths = torch.tensor([ep["action"].shape[0] for ep in self.episodes])
            self._flat = {k: torch.cat([ep[k] for ep in self.episodes]) for k in TRANSITION_FIELDS}
            self._flat["episode"] = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
            self._flat["episode_length"] = lengths
        return self._flat

    def sample(self, batch_size: int, generator: torch.Generator,
               current_goals: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Draw ``batch_size`` transitions: ``obs [B, o]``, ``desired_goal [B, g]``,
        ``action [B, a]``; ``current_goals [Q, g]`` is needed by the ``goal`` sampler."""
        if not self.episodes:
            raise RuntimeError("the prototype buffer is empty")
        flat = self._flatten()
        weights = self._transition_weights(flat, current_goals)
        if weights is None:
            index = torch.randint(flat["action"].shape[0], (batch_size,), generator=generator)
        else:
            index = torch.multinomial(weights, batch_size, replacement=True, generator=generator)
        return {k: flat[k].index_select(0, index) for k in ("obs", "desired_goal", "action")}

    def _transition_weights(self, flat, current_goals):
        """Per-transition sampling weights, or ``None`` for uniform."""
        if self.sampling == "uniform":
            return None
        num_episodes = len(self.episodes)
        if self.sampling == "return":
            returns = torch.tensor([float(m["return"]) for m in self.metadata])
            rank = torch.empty(num_episodes)
            rank[torch.argsort(returns, descending=True)] = torch.arange(1.0, num_episodes + 1)
            episode_weight = 1.0 / rank  # rank-based priority: robust to the reward scale
        else:
            if current_goals is None:
                raise ValueError("goal-nearest prototype sampling needs the current goals")
            episode_goals = torch.stack([ep["desired_goal"][0] for ep in self.episodes])
            distance = torch.cdist(episode_goals, current_goals.float()).min(dim=1).values
            keep = max(1, math.ceil(self.nearest_fraction * num_episodes))
            episode_weight = torch.zeros(num_episodes)
            episode_weight[torch.argsort(distance)[:keep]] = 1.0
        # Each episode's weight is shared by its transitions.
        return (episode_weight / flat["episode_length"])[flat["episode"]]

    # ---------------------------------------------------------------------- persistence
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Flat arrays for an ``.npz``; strings as unicode arrays (no pickling on load)."""
        if not self.episodes:
            return {"num_episodes": np.array(0)}
        flat = self._flatten()
        arrays = {k: flat[k].numpy() for k in TRANSITION_FIELDS}
        arrays["episode_length"] = flat["episode_length"].numpy()
        arrays["num_episodes"] = np.array(len(self.episodes))
        for key in ("task_id", "source"):
            arrays[f"meta.{key}"] = np.array([str(m[key]) for m in self.metadata])
        for key in ("success", "return", "timestamp"):
            arrays[f"meta.{key}"] = np.array([m[key] for m in self.metadata], dtype=np.float64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace the contents with what ``state_arrays`` wrote."""
        self.episodes, self.metadata, self._flat = [], [], None
        if int(arrays["num_episodes"]) == 0:
            return
        bounds = np.concatenate([[0], np.cumsum(arrays["episode_length"])])
        for i in range(int(arrays["num_episodes"])):
            part = slice(bounds[i], bounds[i + 1])
            self.episodes.append({k: torch.from_numpy(np.array(arrays[k][part]))
                                  for k in TRANSITION_FIELDS})
            self.metadata.append({"task_id": str(arrays["meta.task_id"][i]),
                                  "source": str(arrays["meta.source"][i]),
                                  "success": bool(arrays["meta.success"][i]),
                                  "return": float(arrays["meta.return"][i]),
                                  "timestamp": float(arrays["meta.timestamp"][i])})
