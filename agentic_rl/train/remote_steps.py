"""The loop's step source with rollout workers (see ``train.rollout_workers``): chunks from the
workers, renumbered into the learner's text table where the envs have one, joined side by side
and fed one step at a time."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from agentic_rl.collect.chunks import Chunk, CollectedStep, join, unpack
from agentic_rl.config import ConfigError
from agentic_rl.train.rollout_workers import RolloutWorkers
from agentic_rl.train.setup import Run, envs_replicated


class RowMaps:
    """Per worker, its text table's row ids to the learner's (``table``): the worker sends the
    texts it added with each chunk; ``keys`` are the observation parts holding row ids."""

    def __init__(self, table: Any, keys: tuple[str, ...], workers: int) -> None:
        self.table, self.keys = table, keys
        self.maps = [np.zeros(1, np.int64) for _ in range(workers)]

    def restart(self, worker: int) -> None:
        """A restarted worker has a new table: only the empty text (row 0) is shared."""
        self.maps[worker] = np.zeros(1, np.int64)

    def apply(self, chunk: Chunk, worker: int) -> Chunk:
        if chunk.texts:
            self.maps[worker] = np.concatenate([self.maps[worker], self.table.ids(chunk.texts)])
        rows = self.maps[worker]
        arrays = {name: rows[values] if name.partition("/")[2] in self.keys else values
                  for name, values in chunk.arrays.items()}
        return Chunk(arrays, chunk.finished)


class RemoteSteps:
    """Chunks of ``chunk_steps`` steps from every worker. Checkpoints taken here are never
    exact (the workers' episodes in progress are not saved; a resumed run starts them again)."""

    defers_updates = False
    at_episode_boundary = False
    waits_for_boundary = False

    def __init__(self, run: Run, count: int) -> None:
        training = run.config.training
        if not envs_replicated(run.config) and count > run.envs.num_envs:
            raise ConfigError(f"training.rollout_workers={count} is more than the "
                              f"{run.envs.num_envs} envs this algorithm splits among them")
        per_update = getattr(run.storage, "steps_per_update", None)
        self.on_policy = per_update is not None
        table = getattr(run.envs, "table", None)
        # off-policy: two chunks queued per worker, so none waits while another finishes
        self.workers = RolloutWorkers(run.config, count, run.step, 1 if self.on_policy else 2,
                                      text=table is not None)
        self.num_envs = self.workers.num_envs
        self.episode_seeds = np.zeros(self.num_envs, dtype=np.int64)
        self.chunk_steps = per_update or max(1, training.weight_sync_every // self.num_envs)
        self.requested = run.step  # env steps asked of the workers so far
        self.rows = None if table is None else RowMaps(table, run.envs.table_keys, count)
        self.schedule = run.envs.env_state() if hasattr(run.envs, "env_state") else None

    def env_state(self) -> dict | None:
        """Where each env's episodes stand (e.g. text schedule slots' episode numbers)."""
        return self.schedule

    def _launch(self, run: Run) -> None:
        """Top the workers' queues up with the learner's current weights."""
        random = (self.requested < run.config.training.learning_starts
                  and not run.storage.warm)
        rounds = self.workers.request(self.chunk_steps, run.algo.state_dict(),
                                      "random" if random else "explore", run.curriculum.index,
                                      self.schedule)
        self.requested += rounds * self.chunk_steps * self.num_envs

    def _gather(self, run: Run) -> Chunk:
        chunks, restarted = self.workers.gather()
        if self.rows is not None:
            for worker in restarted:
                self.rows.restart(worker)
            chunks = [self.rows.apply(chunk, w) for w, chunk in enumerate(chunks)]
        if restarted:
            run.storage.abandon(self.workers.env_mask(restarted))
        chunk = join(chunks)
        if self.schedule is not None:  # the episode each slot plays after the chunk
            self.schedule = {"episodes": chunk.arrays["next_obs/episode"][-1].tolist()}
        return chunk

    def steps(self, run: Run, updates) -> Iterator[CollectedStep]:
        self._launch(run)
        while True:
            chunk = self._gather(run)
            if not self.on_policy:
                self._launch(run)  # collected while this chunk is learnt from (in the queue)
            for t in range(chunk.steps):
                yield unpack(chunk, t)
            if self.on_policy:  # the loop has run the update this rollout owed
                self._launch(run)

    def metrics(self) -> dict[str, float]:
        return self.workers.metrics()

    def close(self) -> None:
        self.workers.close()
