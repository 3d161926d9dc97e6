"""Save and restore a whole run: learner, buffers, prototypes, generators, loop counters."""

from __future__ import annotations

from typing import Any

import numpy as np
from agentic_rl.train.checkpoint import (flatten_state, load_checkpoint, prefixed,
                                         save_checkpoint, unflatten_state, with_prefix)
from agentic_rl.train.setup import Run

FORCED_AFTER_EPISODES = 2  # checkpoint mid-episode if no episode boundary comes in this long


def save_run(run: Run, collector) -> None:
    """Checkpoint now. Exact (bit-identical continuation) when every env is between episodes."""
    exact = collector.at_episode_boundary
    tensors, algo_skeleton = flatten_state(run.algo.state_dict(), "algo")
    tensors["loop.sample_generator"] = run.sample_generator.get_state()
    meta: dict[str, Any] = {
        "step": run.step, "episodes": run.episodes, "wall_seconds": run.wall_seconds,
        "exact": exact, "reset_seeds": collector.episode_seeds.tolist(),
        "rng": run.rng.bit_generator.state, "algo": algo_skeleton,
        "curriculum_index": run.curriculum.index, "skills": run.skills.state_dict(),
        "current_skills": run.current_skills, "recent_episodes": run.recent_episodes,
        "eval_history": run.eval_history, "config": run.config.model_dump(mode="json")}
    buffers = with_prefix(run.replay.state_arrays(), "replay")
    if run.demo_replay is not None:
        buffers |= with_prefix(run.demo_replay.state_arrays(), "demo_replay")
    for name, buffer in run.prototypes.items():
        buffers |= with_prefix(buffer.state_arrays(), f"prototypes.{name}")
    save_checkpoint(run.run_dir / "checkpoints", run.step, tensors, meta, buffers)
    run.checkpoint_pending_since = None


def maybe_checkpoint(run: Run, previous_step: int, collector) -> None:
    """Checkpoint every ``checkpoint_freq`` steps, at the next episode boundary (or, when the
    envs' episodes never line up, after ``FORCED_AFTER_EPISODES`` episode lengths)."""
    every = run.config.training.checkpoint_freq
    if run.step // every > previous_step // every and run.checkpoint_pending_since is None:
        run.checkpoint_pending_since = run.step
    if run.checkpoint_pending_since is None:
        return
    horizon = run.eval_env.spec.max_episode_steps if run.eval_env.spec else 1000
    waited = run.step - run.checkpoint_pending_since
    if collector.at_episode_boundary or waited >= FORCED_AFTER_EPISODES * (horizon or 1000):
        save_run(run, collector)


def restore_run(run: Run, folder) -> None:
    """Load a checkpoint written by ``save_run`` into a freshly built ``run``."""
    tensors, meta, buffers = load_checkpoint(folder)
    run.algo.load_state_dict(unflatten_state(meta["algo"], tensors))
    run.sample_generator.set_state(tensors["loop.sample_generator"])
    run.rng.bit_generator.state = meta["rng"]
    run.step, run.episodes, run.wall_seconds = meta["step"], meta["episodes"], meta["wall_seconds"]
    run.curriculum.index = meta["curriculum_index"]
    run.curriculum.apply(run.envs)
    run.curriculum.apply(run.eval_env)
    run.skills.load_state_dict(meta["skills"])
    run.current_skills = list(meta["current_skills"])
    run.recent_episodes, run.eval_history = meta["recent_episodes"], meta["eval_history"]
    run.replay.load_state_arrays(prefixed(buffers, "replay"))
    if run.demo_replay is not None:
        run.demo_replay.load_state_arrays(prefixed(buffers, "demo_replay"))
    for name, buffer in run.prototypes.items():
        buffer.load_state_arrays(prefixed(buffers, f"prototypes.{name}"))
    if meta["exact"]:
        run.resume_reset_seeds = np.asarray(meta["reset_seeds"], dtype=np.int64)
    else:  # episodes cut by the checkpoint stay unsampleable; new ones start here
        run.replay.current_start[:] = run.replay.pos


def pending_reset_seeds(run: Run) -> np.ndarray | None:
    """Seeds that recreate the envs' episodes at an exact checkpoint (None otherwise)."""
    seeds = run.resume_reset_seeds
    run.resume_reset_seeds = None
    return seeds


