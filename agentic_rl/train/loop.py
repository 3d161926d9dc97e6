"""The training loop: act -> collect -> store (the algorithm's storage) -> sample -> update ->
evaluate / log / checkpoint / curriculum / stop. It never branches on the algorithm: what
differs lives in the algorithm and its storage. Explicit and flat, like TorchRL's SOTA
scripts."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Iterator

import numpy as np

from agentic_rl.collect.chunks import CollectedStep
from agentic_rl.collect.collector import Collector, FinishedEpisode
from agentic_rl.data.checkpoint import BEST_DIR, read_model_meta, save_model
from agentic_rl.envs.make import env_factory
from agentic_rl.train import state
from agentic_rl.train.evaluate import EvalResult, evaluate
from agentic_rl.train.logger import Logger
from agentic_rl.train.loop_signals import CheckpointedInterrupt, CtrlC
from agentic_rl.train.progress import Progress
from agentic_rl.train.setup import Run

RECENT_EPISODES = 20


def record_episodes(run: Run, finished: list[FinishedEpisode]) -> None:
    """Rollout statistics of the episodes that just ended."""
    run.episodes += len(finished)
    run.recent_episodes = (run.recent_episodes + [{
        "return": e.episode_return, "length": e.length, "success": float(e.success)}
        for e in finished])[-RECENT_EPISODES:]


def run_evaluation(run: Run, logger: Logger) -> float:
    """Evaluate, log, keep the best learner so far in ``RUN_DIR/best``, and advance the
    curriculum (the storage gets the finished stage's successful episodes, e.g. as prototypes
    of source ``curriculum``)."""
    training = run.config.training
    safety = run.safety
    result = evaluate(run.algo, run.eval_env, training.num_eval_episodes, training.seed,
                      keep_episodes=run.curriculum.active,
                      shield=safety.eval_shield if safety else None,
                      monitor=safety.eval_monitor if safety else None)
    metrics = result.metrics()
    keep_if_best(run, result)
    run.eval_history.append({"step": run.step, **result.to_dict()})
    if run.curriculum.active:
        if run.curriculum.maybe_advance(result.success_rate):
            run.storage.set_task(run.curriculum.task_id, result.episodes)
            run.curriculum.apply(run.envs)
            run.curriculum.apply(run.eval_env)
        metrics["curriculum/stage"] = float(run.curriculum.index)
    logger.log(run.step, metrics)
    if run.on_evaluation is not None:
        run.on_evaluation(run.step, metrics)
    return result.success_rate


def keep_if_best(run: Run, result: EvalResult, final: bool = False) -> bool:
    """Save the learner to ``RUN_DIR/best`` when ``result`` scores at least as high as every
    earlier evaluation of the run: those in ``run.eval_history`` (call this before appending
    ``result``) and the one ``best/`` records, which may be the final evaluation of an earlier
    session of a resumed run (ignored when it is from later steps than the run resumed at).
    Later evaluations win ties; a learner ``best/`` already holds (the final evaluation at the
    step of the last in-run one) is not written again. Returns whether it saved."""
    earlier = [row["success_rate"] for row in run.eval_history]
    kept = read_model_meta(run.run_dir / BEST_DIR)
    if kept is not None and kept.get("step") == run.step:
        return False
    if kept is not None and "eval" in kept and kept.get("step", run.step + 1) <= run.step:
        earlier.append(kept["eval"]["success_rate"])
    if result.success_rate < max(earlier, default=-1.0):
        return False
    extra = {"step": run.step, "eval": result.to_dict(), **({"final": True} if final else {})}
    save_model(run.run_dir / BEST_DIR, run.algo, extra, run.run_dir / "config.yaml")
    return True


def episode_metrics(recent: list[dict[str, float]]) -> dict[str, float]:
    """Mean return, length and success of the recent episodes (``rollout/`` keys)."""
    if not recent:
        return {}
    return {f"rollout/{name}": float(np.mean([e[key] for e in recent]))
            for name, key in (("ep_rew_mean", "return"), ("ep_len_mean", "length"),
                              ("success_rate", "success"))}


def overlapped_envs(run: Run):
    """A copy of the training envs in worker processes (``AsyncVectorEnv``), so the next env
    step runs on another core while the learner updates; ``None`` where the loop has to touch
    the envs between steps (curriculum stages, safety shield/monitor) or it is switched off."""
    training, env_cfg = run.config.training, run.config.environment
    if not training.overlap_env or run.curriculum.active or run.safety is not None:
        return None
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode

    return AsyncVectorEnv([env_factory(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region)
                           for _ in range(env_cfg.num_envs)], shared_memory=True,
                          context="fork", autoreset_mode=AutoresetMode.DISABLED)


def train_loop(run: Run, logger: Logger, show_progress: bool = True) -> None:
    """Run until ``training.total_timesteps`` env steps (or the stop success rate).

    Steps come from a step source: the in-process envs (``LocalSteps``) or rollout workers
    (``train.rollout_workers``, with ``training.rollout_workers > 0``). With
    ``training.overlap_env`` the in-process envs step in worker processes: step t+1's action is
    chosen, the envs start stepping, and step t's gradient updates run meanwhile (the action
    comes from the policy one update older than in a sequential loop; the updates see exactly
    the same replay contents). Before evaluations, logs, checkpoints and at episode boundaries
    no update is left pending, so checkpoints resume exactly."""
    source = step_source(run)
    run.collection_metrics = getattr(source, "metrics", None)
    try:
        with CtrlC() as ctrl_c:
            _train_loop(run, logger, show_progress, source, ctrl_c)
    finally:
        source.close()
    if ctrl_c.pressed:
        raise CheckpointedInterrupt(run.step)


def step_source(run: Run):
    """Rollout workers where ``training.rollout_workers`` asks for them, else the run's envs
    (stepped in worker processes with ``training.overlap_env``)."""
    workers = run.config.training.rollout_workers
    if workers:
        from agentic_rl.train.remote_steps import RemoteSteps

        if not callable(getattr(run.storage, "abandon", None)):
            raise TypeError(f"{type(run.storage).__name__} has no abandon(envs); rollout "
                            "workers need it to drop a dead worker's episodes")
        return RemoteSteps(run, workers)
    return LocalSteps(run, overlapped_envs(run))


class LocalSteps:
    """The loop's step source on the run's own envs (or their ``AsyncVectorEnv`` copy)."""

    waits_for_boundary = True  # checkpoints wait for an episode boundary: they resume exactly

    def __init__(self, run: Run, async_envs) -> None:
        self.async_envs = async_envs
        self.defers_updates = async_envs is not None
        self.collector = Collector(async_envs if async_envs is not None else run.envs, run.rng)
        self.num_envs = self.collector.num_envs

    @property
    def at_episode_boundary(self) -> bool:
        return self.collector.at_episode_boundary

    @property
    def episode_seeds(self) -> np.ndarray:
        return self.collector.episode_seeds

    def env_state(self) -> dict | None:
        """The envs' own state for a checkpoint (e.g. text schedule slots' episode numbers)."""
        envs = self.collector.envs
        return envs.env_state() if hasattr(envs, "env_state") else None

    def steps(self, run: Run, updates: "Updates") -> Iterator[CollectedStep]:
        """Act, step the envs and hand over each step; the updates owed by the previous step
        run while the envs step."""
        collector, algo = self.collector, run.algo
        collector.reset_all(state.pending_reset_seeds(run))
        policy_state = None
        shield = run.safety.train_shield if run.safety is not None else None
        while True:
            random = run.step < run.config.training.learning_starts and not run.storage.warm
            obs = collector.policy_obs()
            if shield is not None:
                obs = shield.restrict(obs)
            env_action, policy_state, extras = algo.act(obs, policy_state,
                                                        "random" if random else "explore")
            if shield is not None:  # learn from the executed action
                env_action = shield.project(obs, env_action)
                extras = algo.executed(extras, env_action)
            episode_step = collector.steps_in_episode.copy()
            collector.step_async(env_action)
            updates.run(run)  # the previous step's, while the envs step
            transition, episode_end, finished = collector.step_wait(extras["unit_action"])
            yield CollectedStep(collector.record(transition, extras, episode_end, finished, obs),
                                env_action, episode_step)

    def close(self) -> None:
        if self.async_envs is not None:
            self.async_envs.close()


def _train_loop(run: Run, logger: Logger, show_progress: bool, source,
                ctrl_c: CtrlC) -> None:
    training, algo, storage = run.config.training, run.algo, run.storage
    num_envs, updates = source.num_envs, Updates()
    clock = (time.perf_counter(), run.step)  # start of the current logging interval
    session_start = time.perf_counter() - run.wall_seconds
    last_success = run.eval_history[-1]["success_rate"] if run.eval_history else float("nan")
    with Progress(training.total_timesteps, run.step, show_progress) as progress:
        steps = source.steps(run, updates) if run.step < training.total_timesteps else iter(())
        for step in steps:
            record = step.record
            if run.safety is not None:
                reached = record.transition.get("next_obs")  # goal envs: the state reached
                run.safety.monitor.check(None if reached is None else reached.numpy(),
                                         step.env_action.numpy(), step.episode_step,
                                         inputs=record.obs)
            for episode in storage.add(record):
                algo.observe(episode)
            record_episodes(run, record.finished)
            previous, run.step = run.step, run.step + num_envs
            updates.pending = storage.owed(run.step, num_envs)
            evaluated = crossed(previous, run.step, training.eval_freq)
            logged = crossed(previous, run.step, training.log_freq)
            if not source.defers_updates or evaluated or logged or source.at_episode_boundary or (
                    ctrl_c.pressed or
                    run.checkpoint_pending_since is not None or run.step >= training.total_timesteps
                    or crossed(previous, run.step, training.checkpoint_freq)):
                updates.run(run)
            if evaluated:
                last_success = run_evaluation(run, logger)
            if logged:
                clock = log_training(run, logger, updates, clock)
            run.wall_seconds = time.perf_counter() - session_start
            state.maybe_checkpoint(run, previous, source)
            progress.update(run.step, last_success)
            stop_at = training.stop_success_rate
            if ctrl_c.pressed or run.step >= training.total_timesteps or (
                    evaluated and stop_at is not None and last_success >= stop_at):
                break
        if hasattr(steps, "close"):
            steps.close()
    if updates.counts:
        log_training(run, logger, updates, clock)
    state.save_run(run, source)


class Updates:
    """Gradient updates owed (``pending``: the storage's sample requests) and the metrics of
    those done since the last log (per key: sum and count)."""

    def __init__(self) -> None:
        self.pending: list = []
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def run(self, run: Run) -> None:
        """Each owed update on a fresh batch."""
        for request in self.pending:
            batch = run.storage.sample(request, run.sample_generator)
            for key, value in run.algo.update(batch).items():
                self.sums[key] += value
                self.counts[key] += 1
            if isinstance(batch, dict) and "weight" in batch:
                give_priorities(run, batch)
        self.pending = []

    def means(self) -> dict[str, float]:
        means = {k: v / self.counts[k] for k, v in self.sums.items()}
        self.sums, self.counts = defaultdict(float), defaultdict(int)
        return means


def give_priorities(run: Run, batch: dict) -> None:
    """Hand a prioritised batch's TD errors, written by the learner, back to the storage."""
    if "td_error" not in batch:
        raise RuntimeError(f"{type(run.algo).__name__} does not support prioritized replay "
                           "(its update wrote no td_error); remove algorithm.prioritized")
    run.storage.update_priorities(batch["index"], batch["td_error"])


def log_training(run: Run, logger: Logger, updates: Updates,
                 clock: tuple[float, int]) -> tuple[float, int]:
    """Log update metrics averaged since the last call, rollout and speed statistics; returns
    the new interval start ``(time, step)``."""
    now = time.perf_counter()
    fps = (run.step - clock[1]) / max(now - clock[0], 1e-9)
    logger.log(run.step, {**updates.means(), **episode_metrics(run.recent_episodes),
                          **run.storage.metrics(),
                          **(run.safety.metrics() if run.safety else {}),
                          **(run.collection_metrics() if run.collection_metrics else {}),
                          "time/fps": fps, "time/episodes": float(run.episodes)})
    return now, run.step


def crossed(previous: int, current: int, every: int) -> bool:
    """True when a multiple of ``every`` lies in ``(previous, current]``."""
    return current // every > previous // every
