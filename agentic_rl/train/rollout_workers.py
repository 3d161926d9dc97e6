"""Collection in Ray actors (``training.rollout_workers: W``).

Each worker holds ``environment.num_envs`` envs (a text agent: its share of the schedule
slots) and a copy of the learner, acts with it and sends chunks of ``T`` steps
(``collect.chunks``) through Ray's object store; the learner's weights travel the other way
with each chunk request. ``train.remote_steps`` joins the workers' chunks side by side, so the
storage sees one vector env, and feeds them step by step exactly as in-process steps.

Off-policy learners: each worker has two chunk requests queued, and a new one (with the
learner's current weights) is added as each chunk arrives, so the workers collect while the
learner updates and a quick worker does not wait for a slow one (the acting policy is at most
three chunks old; ``T`` is ``training.weight_sync_every`` over the number of envs). Learners
whose storage declares ``steps_per_update`` (on-policy rollouts) get chunks of exactly one
rollout, collected with the weights of the latest update, so they stay on-policy.

A worker that dies (e.g. ``kill -9``) is restarted by Ray; its chunks in flight are lost, its
envs' episodes in progress are abandoned in the storage (``storage.abandon``) and it starts
fresh episodes with the current weights. A worker that dies between two chunks loses no chunk:
Ray runs the next request on the restarted actor without an error, so every chunk names the
process that collected it (``Chunk.sender``) and a new name is a restart too. The loop logs
``workers/restarts`` and ``workers/lost_chunks``.
"""

from __future__ import annotations

import collections
import secrets
import sys
import time
from typing import Any

import numpy as np
import torch

from agentic_rl.collect.chunks import Chunk, CollectedStep, pack
from agentic_rl.collect.collector import Collector
from agentic_rl.config import ExperimentConfig, validate_config
from agentic_rl.envs.curriculum import Curriculum
from agentic_rl.train.embedding_store import share_embeddings, start_store
from agentic_rl.train.setup import build_algo, build_envs

RESUBMITS = 3  # attempts to get a chunk from a worker that keeps dying
RESTART_TIMEOUT = 600.0  # seconds a restarted worker may take to build its envs


def to_cpu(state: Any) -> Any:
    """A copy of a (nested) state dict with every tensor on the CPU."""
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        return {k: to_cpu(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(to_cpu(v) for v in state)
    return state


class RolloutWorker:
    """Envs and a CPU copy of the learner in one process (the body of a Ray actor):
    ``environment.num_envs`` envs, or for an algorithm with its own ``build_envs`` (text
    agents) this worker's share of them.

    Args:
        config: the run's resolved config (``model_dump`` form).
        index: the worker's number (seeds its episodes); ``count``: how many there are.
        embeddings: a ``train.embedding_store`` actor the worker's text encoder shares.
    """

    def __init__(self, config: dict[str, Any], index: int, count: int,
                 embeddings: Any = None) -> None:
        if embeddings is not None:
            share_embeddings(embeddings)
        training = {k: v for k, v in config["training"].items()
                    if k not in ("rollout_workers", "weight_sync_every")}
        raw = {**config, "training": {**training, "device": "cpu"}}
        self.config: ExperimentConfig = validate_config(raw)
        torch.set_num_threads(1)
        self.index = index
        self.envs, eval_env = build_envs(self.config, (index, count))
        self.table = getattr(self.envs, "table", None)  # text row ids index it
        self.table_sent = 1  # rows the learner knows (row 0, the empty text, it always does)
        self.algo = build_algo(self.config, eval_env)
        eval_env.close()
        self.curriculum = Curriculum(self.config.environment.curriculum)
        self.name = secrets.token_hex(8)  # a restarted actor is a new process with a new name
        self.session: int | None = None
        self.collector: Collector | None = None
        self.policy_state: Any = None

    def num_envs(self) -> int:
        return int(self.envs.num_envs)

    def _start(self, session: int, env_state: dict | None) -> None:
        """Fresh episodes, seeded by ``(seed, index, session)`` and, in an actor Ray restarted,
        by its name too (its episodes differ from the first incarnation's); ``env_state`` (e.g.
        the text schedule's episode numbers) where the learner has one."""
        if env_state is not None:
            self.envs.load_env_state(env_state)
        entropy = [self.config.training.seed, self.index, session]
        if was_restarted():
            entropy.append(int(self.name, 16))
        seeds = np.random.SeedSequence(entropy)
        torch.manual_seed(int(seeds.generate_state(1)[0]))
        self.collector = Collector(self.envs, np.random.default_rng(seeds))
        self.collector.reset_all()
        self.policy_state, self.session = None, session

    def collect(self, steps: int, weights: dict[str, Any], mode: str,
                session: int, stage: int, env_state: dict | None) -> Chunk:
        """``steps`` steps of every env with the learner state ``weights``.

        ``session`` is the learner's env step when its session started: a new one (or a new
        process) starts fresh episodes (from ``env_state``); ``stage`` is the curriculum stage.
        The chunk's ``texts`` are the rows this worker's text table added since the last chunk."""
        if session != self.session:
            self._start(session, env_state)
        self.algo.load_state_dict(weights)
        if self.curriculum.active and stage != self.curriculum.index:
            self.curriculum.index = stage
            self.curriculum.apply(self.envs)
        collector, collected = self.collector, []
        for _ in range(steps):
            obs = collector.policy_obs()
            env_action, self.policy_state, extras = self.algo.act(obs, self.policy_state, mode)
            episode_step = collector.steps_in_episode.copy()
            transition, episode_end, finished = collector.step(env_action, extras["unit_action"])
            collected.append(CollectedStep(
                collector.record(transition, extras, episode_end, finished, obs),
                env_action, episode_step))
        chunk = pack(collected)
        chunk.sender = self.name
        if self.table is not None:
            chunk.texts = self.table.texts[self.table_sent:]
            self.table_sent = len(self.table)
        return chunk


def was_restarted() -> bool:
    """Whether this process is a Ray actor that Ray restarted after its death."""
    import ray

    context = ray.get_runtime_context() if ray.is_initialized() else None
    return bool(context and context.get_actor_id() and context.was_current_actor_reconstructed)


class RolloutWorkers:
    """The learner's side: ``count`` worker actors, each with a queue of chunk requests.

    Every worker keeps up to ``depth`` requests queued, so one whose envs are quick goes on
    collecting while the learner waits for a slower one's chunk (the chunks are joined in
    lockstep; only the collection runs ahead).

    Args:
        config: the run's config.
        count: number of workers (``training.rollout_workers``).
        first_step: the run's env step when this session started (seeds fresh episodes).
        depth: requests queued per worker.
        text: the envs embed texts: the workers and this process share one embedding store.
    """

    def __init__(self, config: ExperimentConfig, count: int, first_step: int,
                 depth: int = 1, text: bool = False) -> None:
        import ray

        cpus = ray.available_resources().get("CPU", 0.0)
        actor = ray.remote(RolloutWorker).options(
            num_cpus=min(1.0, max(cpus, 0.01) / count), max_restarts=-1, max_task_retries=0)
        dumped = config.model_dump(mode="json")
        self.store = start_store() if text else None
        self.encoder = share_embeddings(self.store) if text else None
        self.handles = [actor.remote(dumped, index, count, self.store) for index in range(count)]
        sizes = ray.get([handle.num_envs.remote() for handle in self.handles])
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])  # worker w: envs [o_w, o_w+1)
        self.num_envs = int(self.offsets[-1])
        self.first_step, self.depth = first_step, depth
        self.restarts = [0] * count
        self.lost_chunks = 0
        self.senders: list[str | None] = [None] * count  # who sent each worker's last chunk
        self._queues: list[collections.deque] = [collections.deque() for _ in range(count)]
        self._request: tuple = ()

    def request(self, steps: int, weights: dict[str, Any], mode: str, stage: int,
                env_state: dict | None = None) -> int:
        """Top every worker's queue up to ``depth`` requests for ``steps`` steps with these
        weights (returns at once); ``env_state`` is what a worker that starts fresh episodes
        starts them from. Returns how many chunk rounds were added (0 to ``depth``)."""
        import ray

        self._request = (steps, ray.put(to_cpu(weights)), mode, stage, env_state)
        added = self.depth - min(len(queue) for queue in self._queues)
        for worker, queue in enumerate(self._queues):
            while len(queue) < self.depth:
                queue.append(self._submit(worker))
        return added

    def _submit(self, worker: int):
        steps, weights_ref, mode, stage, env_state = self._request
        return self.handles[worker].collect.remote(
            steps, weights_ref, mode, self.first_step, stage, env_state)

    def gather(self) -> tuple[list[Chunk], list[int]]:
        """Each worker's oldest requested chunk, and the workers that were restarted since
        their last chunk (their chunk is one of fresh episodes)."""
        chunks, restarted = [], []
        for worker, queue in enumerate(self._queues):
            chunk = self._oldest_chunk(worker, queue)
            if self.senders[worker] not in (None, chunk.sender):
                restarted.append(worker)
                self.restarts[worker] += 1
                print(f"rollout worker {worker} was restarted by Ray; its episodes in progress "
                      "are lost", file=sys.stderr)
            self.senders[worker] = chunk.sender
            chunks.append(chunk)
        return chunks, restarted

    def _oldest_chunk(self, worker: int, queue: collections.deque) -> Chunk:
        """The worker's oldest requested chunk that arrives. A request the worker died with
        is lost; those queued behind it that Ray runs on the restarted worker are not."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        for _ in range(RESUBMITS + self.depth):
            if not queue:
                self._wait_until_back(worker)
                queue.append(self._submit(worker))
            try:
                return ray.get(queue.popleft())
            except (RayActorError, ActorUnavailableError) as error:
                self.lost_chunks += 1
                print(f"rollout worker {worker} died ({type(error).__name__}); a chunk it was "
                      "collecting is lost", file=sys.stderr)
        raise RuntimeError(f"rollout worker {worker} lost {RESUBMITS + self.depth} chunks in "
                           "a row: it dies again each time Ray restarts it")

    def _wait_until_back(self, worker: int) -> None:
        """Block until Ray has restarted the worker (its envs and learner copy are built)."""
        import ray
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        deadline = time.monotonic() + RESTART_TIMEOUT
        while time.monotonic() < deadline:
            try:
                ray.get(self.handles[worker].num_envs.remote(), timeout=RESTART_TIMEOUT)
                return
            except (ActorUnavailableError, GetTimeoutError, RayActorError):
                time.sleep(0.5)  # still restarting
        raise RuntimeError(f"rollout worker {worker} did not come back within "
                           f"{RESTART_TIMEOUT} s of its restart")

    def env_mask(self, workers: list[int]) -> np.ndarray:
        """``[num_envs]`` bool: the envs of ``workers``."""
        mask = np.zeros(self.num_envs, dtype=bool)
        for worker in workers:
            mask[self.offsets[worker]:self.offsets[worker + 1]] = True
        return mask

    def metrics(self) -> dict[str, float]:
        return {"workers/restarts": float(sum(self.restarts)),
                "workers/lost_chunks": float(self.lost_chunks)}

    def close(self) -> None:
        import ray

        for handle in self.handles:
            ray.kill(handle, no_restart=True)
        if self.store is not None:
            self.encoder.peers = None
            ray.kill(self.store, no_restart=True)
