"""Env steps in chunks: ``T`` consecutive steps of ``N`` envs packed into one flat dict of
``[T, N, ...]`` numpy arrays, the form a rollout worker sends (one message per chunk, never
single steps; numpy arrays cross Ray's object store without a copy), and unpacked again into the
loop's per-step records. Chunks of several workers are joined along the env axis, so the
storage sees one vector env of ``W * N`` envs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from agentic_rl.collect.collector import FinishedEpisode
from agentic_rl.data.replay import as_numpy
from agentic_rl.data.storage import StepRecord

PARTS = ("transition", "extras", "next_obs", "obs", "reached")  # the StepRecord dicts


@dataclass
class CollectedStep:
    """One env step as the loop consumes it: the storage's record, the action the envs ran
    (``[N, act_dim]`` env units, for the safety monitor) and each env's step index within its
    episode before the step (``[N]``)."""

    record: StepRecord
    env_action: torch.Tensor
    episode_step: np.ndarray


@dataclass
class Chunk:
    """``T`` steps of ``N`` envs: ``arrays`` maps ``part/key`` (and ``episode_end``,
    ``env_action``, ``episode_step``) to ``[T, N, ...]``; ``finished[t]`` the episodes that
    ended at step ``t``; ``texts`` the rows the sender's text table added (text agents);
    ``sender`` names the process that collected it (a restarted worker has a new name)."""

    arrays: dict[str, np.ndarray]
    finished: list[list[FinishedEpisode]]
    texts: list[str] = field(default_factory=list)
    sender: str = ""

    @property
    def steps(self) -> int:
        return len(self.finished)

    @property
    def num_envs(self) -> int:
        return int(self.arrays["episode_end"].shape[1])


def pack(steps: list[CollectedStep]) -> Chunk:
    """Stack ``steps`` (in order) into one chunk."""
    if not steps:
        raise ValueError("a chunk needs at least one step")
    first = steps[0].record
    arrays = {f"{part}/{key}": np.stack([as_numpy(getattr(s.record, part)[key]) for s in steps])
              for part in PARTS for key in getattr(first, part)}
    arrays["episode_end"] = np.stack([as_numpy(s.record.episode_end) for s in steps])
    arrays["env_action"] = np.stack([as_numpy(s.env_action) for s in steps])
    arrays["episode_step"] = np.stack([s.episode_step for s in steps])
    return Chunk(arrays, [list(s.record.finished) for s in steps])


def join(chunks: list[Chunk]) -> Chunk:
    """Chunks of equal length from envs ``0..N_0-1``, ``N_0..``, ... side by side (a copy:
    arrays read from Ray's object store are read-only)."""
    lengths = {c.steps for c in chunks}
    if len(lengths) != 1:
        raise ValueError(f"chunks to join must have the same number of steps, got {lengths}")
    keys = chunks[0].arrays.keys()
    arrays = {k: np.concatenate([c.arrays[k] for c in chunks], axis=1) for k in keys}
    finished: list[list[FinishedEpisode]] = [[] for _ in range(chunks[0].steps)]
    offset = 0
    for chunk in chunks:
        for t, episodes in enumerate(chunk.finished):
            finished[t] += [replace(e, env_index=e.env_index + offset) for e in episodes]
        offset += chunk.num_envs
    return Chunk(arrays, finished)


def unpack(chunk: Chunk, t: int) -> CollectedStep:
    """Step ``t`` of ``chunk`` (tensors are views on the chunk's arrays)."""
    parts: dict[str, dict[str, torch.Tensor]] = {part: {} for part in PARTS}
    for name, values in chunk.arrays.items():
        part, _, key = name.partition("/")
        if key:
            parts[part][key] = torch.from_numpy(values[t])
    record = StepRecord(parts["transition"], parts["extras"],
                        torch.from_numpy(chunk.arrays["episode_end"][t]), chunk.finished[t],
                        parts["next_obs"], parts["obs"], parts["reached"])
    return CollectedStep(record, torch.from_numpy(chunk.arrays["env_action"][t]),
                         chunk.arrays["episode_step"][t])
