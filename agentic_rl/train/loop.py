"""The off-policy loop: collect -> store -> sample (HER, demos, prototypes) -> update ->
evaluate / log / checkpoint. Explicit and flat, like TorchRL's SOTA scripts."""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import torch

from agentic_rl.collect.collector import Collector, FinishedEpisode
from agentic_rl.envs.goal import GoalFunctions
from agentic_rl.envs.make import env_factory
from agentic_rl.train import state
from agentic_rl.train.evaluate import evaluate
from agentic_rl.train.logger import Logger
from agentic_rl.train.progress import Progress
from agentic_rl.train.setup import Run

RECENT_EPISODES = 20


def sample_batch(run: Run, batch_size: int) -> dict:
    """A replay batch (demo transitions mixed in by their share of all stored transitions) with
    HER relabelling, plus the current skill's prototype batch for OPD."""
    algo_cfg = run.config.algorithm
    her = her_kwargs(algo_cfg.her, run.goal_fns)
    online = run.replay.num_sampleable()
    demos = run.demo_replay.num_sampleable() if run.demo_replay is not None else 0
    demo_count = round(batch_size * demos / max(online + demos, 1))
    parts = []
    if batch_size - demo_count > 0:
        parts.append(run.replay.sample(batch_size - demo_count, run.sample_generator, **her))
    if demo_count > 0:
        parts.append(run.demo_replay.sample(demo_count, run.sample_generator, **her))
    batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if len(parts) > 1 \
        else parts[0]
    if algo_cfg.name == "opd":
        skill = run.current_skills[run.algo.num_updates % len(run.current_skills)]
        buffer = run.prototypes[skill]
        if len(buffer) > 0:
            goals = run.collector_goals if buffer.sampling == "goal" else None
            batch["prototype"] = buffer.sample(algo_cfg.prototype_batch_size,
                                               run.sample_generator, goals)
    return batch


def her_kwargs(her, goal_fns: GoalFunctions) -> dict:
    """``ReplayBuffer.sample`` arguments for a ``HERConfig`` on an env's goal functions
    (``terminated`` is relabelled only where reaching the goal ends the episode)."""
    return dict(her_strategy=her.strategy, relabel_ratio=her.relabel_ratio,
                reward_fn=goal_fns.reward_fn,
                success_fn=goal_fns.success_fn if goal_fns.terminates_on_success else None)


def on_episode_end(run: Run, episode: FinishedEpisode) -> None:
    """Normaliser statistics, rollout statistics, skill feedback, self-generated prototypes."""
    agent = run.config.agent
    steps = run.replay.last_episode(episode.env_index)
    run.algo.observe({  # every state of the episode, the final one included
        "observation": torch.cat([steps["obs"], steps["next_obs"][-1:]]),
        "achieved_goal": torch.cat([steps["achieved_goal"], steps["next_achieved_goal"][-1:]]),
        "desired_goal": steps["desired_goal"]})
    run.episodes += 1
    run.recent_episodes = (run.recent_episodes + [{
        "return": episode.episode_return, "length": episode.length,
        "success": float(episode.success)}])[-RECENT_EPISODES:]
    skill = run.current_skills[episode.env_index]
    run.skills.feedback(skill, episode.success)
    if episode.success and agent.self_prototypes and run.config.algorithm.name == "opd":
        buffer = run.prototypes[skill]
        buffer.add_episode(steps, "self", task_id=run.curriculum.task_id or skill,
                           episode_return=episode.episode_return)
        buffer.cap_source("self", agent.self_prototype_capacity)
    run.current_skills[episode.env_index] = run.skills.select(run.curriculum.task_id)


def run_evaluation(run: Run, logger: Logger) -> float:
    """Evaluate, log, and advance the curriculum (keeping the finished stage's successes as
    prototypes of source ``curriculum``)."""
    training = run.config.training
    safety = run.safety
    result = evaluate(run.algo, run.eval_env, training.num_eval_episodes, training.seed,
                      keep_episodes=run.curriculum.active,
                      shield=safety.eval_shield if safety else None,
                      monitor=safety.eval_monitor if safety else None)
    metrics = result.metrics()
    run.eval_history.append({"step": run.step, **result.to_dict()})
    if run.curriculum.active:
        finished_stage = run.curriculum.task_id
        if run.curriculum.maybe_advance(result.success_rate):
            for episode in result.episodes:
                for buffer in run.prototypes.values():
                    buffer.add_episode(episode, "curriculum", task_id=finished_stage,
                                       episode_return=float(episode["return"]))
            run.curriculum.apply(run.envs)
            run.curriculum.apply(run.eval_env)
        metrics["curriculum/stage"] = float(run.curriculum.index)
    logger.log(run.step, metrics)
    return result.success_rate


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

    With ``training.overlap_env`` the envs step in worker processes: step t+1's action is
    chosen, the envs start stepping, and step t's gradient updates run meanwhile (the action
    comes from the policy one update older than in a sequential loop; the updates see exactly
    the same replay contents). Before evaluations, logs, checkpoints and at episode boundaries
    no update is left pending, so checkpoints resume exactly."""
    async_envs = overlapped_envs(run)
    try:
        _train_loop(run, logger, show_progress, async_envs)
    finally:
        if async_envs is not None:
            async_envs.close()


def _train_loop(run: Run, logger: Logger, show_progress: bool, async_envs) -> None:
    training, algo = run.config.training, run.algo
    collector = Collector(async_envs if async_envs is not None else run.envs, run.rng)
    collector.reset_all(state.pending_reset_seeds(run))
    run.collector_goals = collector.obs["desired_goal"]
    num_envs, sums = collector.num_envs, defaultdict(float)
    updates = [0, 0]  # [updates counted into sums, updates owed for the latest stored step]
    clock = (time.perf_counter(), run.step)  # start of the current logging interval
    session_start = time.perf_counter() - run.wall_seconds
    last_success = run.eval_history[-1]["success_rate"] if run.eval_history else float("nan")
    with Progress(training.total_timesteps, run.step, show_progress) as progress:
        while run.step < training.total_timesteps:
            if run.step < training.learning_starts and run.demo_replay is None:
                unit = torch.rand((num_envs, algo.actor.mean_head.out_features),
                                  generator=run.sample_generator) * 2 - 1
                env_action = algo.unit_to_env(unit)
            else:
                env_action, _, extras = algo.act(collector.obs, None, deterministic=False)
                unit = extras["unit_action"]
            if run.safety is not None and run.safety.train_shield is not None:
                env_action = run.safety.shielded(run.safety.train_shield, collector.obs,
                                                 env_action)
                unit = algo.env_to_unit(env_action)  # learn from the executed action
            episode_step = collector.steps_in_episode.copy()
            collector.step_async(env_action)
            run_updates(run, updates, sums)  # the previous step's, while the envs step
            transition, episode_end, finished = collector.step_wait(unit)
            if run.safety is not None:
                run.safety.monitor.check(transition["next_obs"].numpy(), env_action.numpy(),
                                         episode_step)
            run.replay.add(transition, episode_end)
            run.collector_goals = collector.obs["desired_goal"]
            for episode in finished:
                on_episode_end(run, episode)
            previous, run.step = run.step, run.step + num_envs
            if run.step >= training.learning_starts:
                updates[1] = run.config.algorithm.updates_per_step * num_envs
            evaluated = crossed(previous, run.step, training.eval_freq)
            logged = crossed(previous, run.step, training.log_freq)
            if async_envs is None or evaluated or logged or collector.at_episode_boundary or (
                    run.checkpoint_pending_since is not None or run.step >= training.total_timesteps
                    or crossed(previous, run.step, training.checkpoint_freq)):
                run_updates(run, updates, sums)
            if evaluated:
                last_success = run_evaluation(run, logger)
            if logged:
                clock = log_training(run, logger, sums, updates[0], clock)
                sums, updates[0] = defaultdict(float), 0
            run.wall_seconds = time.perf_counter() - session_start
            state.maybe_checkpoint(run, previous, collector)
            progress.update(run.step, last_success)
            stop_at = training.stop_success_rate
            if evaluated and stop_at is not None and last_success >= stop_at:
                break
    if updates[0]:
        log_training(run, logger, sums, updates[0], clock)
    state.save_run(run, collector)


def run_updates(run: Run, updates: list[int], sums: dict[str, float]) -> None:
    """The owed gradient updates (``updates[1]``), each on a fresh batch; metrics into ``sums``."""
    for _ in range(updates[1]):
        batch = sample_batch(run, run.config.algorithm.batch_size)
        for key, value in run.algo.update(batch).items():
            sums[key] += value
        updates[0] += 1
    updates[1] = 0


def log_training(run: Run, logger: Logger, sums: dict[str, float], count: int,
                 clock: tuple[float, int]) -> tuple[float, int]:
    """Log update metrics averaged since the last call, rollout and speed statistics; returns
    the new interval start ``(time, step)``."""
    now = time.perf_counter()
    fps = (run.step - clock[1]) / max(now - clock[0], 1e-9)
    logger.log(run.step, {**{k: v / max(count, 1) for k, v in sums.items()},
                          **episode_metrics(run.recent_episodes), **run.skills.metrics(),
                          **(run.safety.metrics() if run.safety else {}),
                          "time/fps": fps, "time/episodes": float(run.episodes)})
    return now, run.step


def crossed(previous: int, current: int, every: int) -> bool:
    """True when a multiple of ``every`` lies in ``(previous, current]``."""
    return current // every > previous // every
