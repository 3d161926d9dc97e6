"""Save and restore a whole run: learner, storage (replays, prototypes), generators, loop
counters."""

from __future__ import annotations

from typing import Any

import numpy as np
from agentic_rl.data.checkpoint import (flatten_state, load_algo_state, load_checkpoint,
                                        prefixed, save_checkpoint, with_prefix)
from agentic_rl.train.setup import Run, horizon_of

FORCED_AFTER_EPISODES = 2  # checkpoint mid-episode if no episode boundary comes in this long


def save_run(run: Run, collector) -> None:
    """Checkpoint now. Exact (bit-identical continuation) when every env is between episodes.
    ``collector`` is the loop's step source (``at_episode_boundary``, ``episode_seeds``)."""
    exact = collector.at_episode_boundary
    tensors, algo_skeleton = flatten_state(run.algo.state_dict(), "algo")
    tensors["loop.sample_generator"] = run.sample_generator.get_state()
    meta: dict[str, Any] = {
        "step": run.step, "episodes": run.episodes, "wall_seconds": run.wall_seconds,
        "exact": exact, "reset_seeds": collector.episode_seeds.tolist(),
        "rng": run.rng.bit_generator.state, "algo": algo_skeleton,
        "curriculum_index": run.curriculum.index, "recent_episodes": run.recent_episodes,
        "eval_history": run.eval_history, "config": run.config.model_dump(mode="json")}
    env_state = collector.env_state()  # e.g. which game each text env plays next
    if env_state is not None:
        meta["env_state"] = env_state
    arrays, meta["storage"] = run.storage.state()
    buffers = with_prefix(arrays, "storage")
    save_checkpoint(run.run_dir / "checkpoints", run.step, tensors, meta, buffers)
    run.checkpoint_pending_since = None


def maybe_checkpoint(run: Run, previous_step: int, collector) -> None:
    """Checkpoint every ``checkpoint_freq`` steps, at the next episode boundary (or, when the
    envs' episodes never line up, after ``FORCED_AFTER_EPISODES`` episode lengths); at once
    where the step source's checkpoints can never be exact (rollout workers)."""
    every = run.config.training.checkpoint_freq
    if run.step // every > previous_step // every and run.checkpoint_pending_since is None:
        run.checkpoint_pending_since = run.step
    if run.checkpoint_pending_since is None:
        return
    waited = run.step - run.checkpoint_pending_since
    if (collector.at_episode_boundary or not collector.waits_for_boundary
            or waited >= FORCED_AFTER_EPISODES * horizon_of(run.eval_env)):
        save_run(run, collector)


def restore_run(run: Run, folder) -> None:
    """Load a checkpoint written by ``save_run`` into a freshly built ``run``."""
    tensors, meta, buffers = load_checkpoint(folder)
    load_algo_state(run.algo, meta, tensors, folder)
    run.sample_generator.set_state(tensors["loop.sample_generator"])
    run.rng.bit_generator.state = meta["rng"]
    run.step, run.episodes, run.wall_seconds = meta["step"], meta["episodes"], meta["wall_seconds"]
    run.curriculum.index = meta["curriculum_index"]
    run.curriculum.apply(run.envs)
    run.curriculum.apply(run.eval_env)
    run.recent_episodes, run.eval_history = meta["recent_episodes"], meta["eval_history"]
    if "env_state" in meta:
        run.envs.load_env_state(meta["env_state"])
    run.storage.load_state(prefixed(buffers, "storage"), meta["storage"], meta["exact"])
    if meta["exact"]:  # otherwise fresh episodes start here (the storage dropped cut ones)
        run.resume_reset_seeds = np.asarray(meta["reset_seeds"], dtype=np.int64)


def pending_reset_seeds(run: Run) -> np.ndarray | None:
    """Seeds that recreate the envs' episodes at an exact checkpoint (None otherwise)."""
    seeds = run.resume_reset_seeds
    run.resume_reset_seeds = None
    return seeds


