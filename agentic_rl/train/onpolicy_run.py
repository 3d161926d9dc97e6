"""A PPO or HGPO run end to end: envs and learner from the config, the on-policy loop
(``train.onpolicy``), logging, checkpoints every ``training.checkpoint_freq`` steps, summary.

Resuming continues from the last checkpoint's learner state and step count; the envs restart
with fresh episodes (on-policy rollouts are not stored), so a resumed run is not bit-identical
to an uninterrupted one, unlike the off-policy loop.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from agentic_rl.algos import ON_POLICY
from agentic_rl.config import ExperimentConfig
from agentic_rl.envs.make import make_onpolicy_vec_env
from agentic_rl.data.checkpoint import (latest_checkpoint, load_learner, save_learner,
                                         write_summary)
from agentic_rl.train.logger import Logger, read_metrics, truncate_metrics
from agentic_rl.train.onpolicy import train_onpolicy
from agentic_rl.train.progress import Progress
from agentic_rl.train.safety import wrap_onpolicy_safety

EVAL_ENVS = 4
EVAL_KEYS = ("eval/success_rate", "eval/mean_return", "eval/mean_length")


def eval_history(metrics_csv: Path) -> list[dict[str, float]]:
    """The evaluations already in a run's ``metrics.csv`` (a resumed run keeps them)."""
    if not metrics_csv.exists():
        return []
    metrics = read_metrics(metrics_csv)
    rows: dict[int, dict[str, float]] = {}
    for key in EVAL_KEYS:
        for step, value in metrics.get(key, []):
            rows.setdefault(step, {"step": step})[key.split("/")[1]] = value
    return [rows[step] for step in sorted(rows)]


def build_onpolicy(config: ExperimentConfig, num_envs: int, seed: int):
    """``(vector env, learner)`` for an on-policy config."""
    env_cfg = config.environment
    envs = make_onpolicy_vec_env(env_cfg.name, num_envs, env_cfg.kwargs, seed)
    algo = ON_POLICY[config.algorithm.name](config.algorithm, envs.single_observation_space,
                                            envs.single_action_space, seed=seed)
    return envs, algo


def train_onpolicy_run(config: ExperimentConfig, run_dir: Path, resume: bool = False,
                       show_progress: bool = True) -> dict:
    """Train, checkpoint, write ``summary.json`` and return it."""
    training = config.training
    torch.set_num_threads(training.torch_threads)
    torch.manual_seed(training.seed)
    envs, algo = build_onpolicy(config, config.environment.num_envs, training.seed)
    done_steps = 0
    if resume:
        done_steps = int(load_learner(algo, latest_checkpoint(run_dir))["step"])
        truncate_metrics(run_dir / "metrics.csv", done_steps)
    eval_env = make_onpolicy_vec_env(config.environment.name, EVAL_ENVS,
                                     config.environment.kwargs, training.seed + 1000)
    envs, eval_env = wrap_onpolicy_safety(config, envs, eval_env)
    safe = config.verification.property_file is not None
    logger = Logger(run_dir, purge_step=done_steps if resume else None)
    history = eval_history(run_dir / "metrics.csv") if resume else []
    started = time.perf_counter()
    last_checkpoint = [done_steps]

    def checkpoint(step: int) -> None:
        save_learner(run_dir, step, algo, config.model_dump(mode="json"))
        last_checkpoint[0] = step

    with Progress(training.total_timesteps, done_steps, show_progress) as progress:
        last_success = [float("nan")]

        def log(step: int, metrics: dict[str, float]) -> None:
            if safe:
                metrics = {**metrics, **envs.metrics(), **eval_env.metrics("eval_")}
            logger.log(done_steps + step, metrics)
            if "eval/success_rate" in metrics:
                history.append({"step": done_steps + step, **{
                    key.split("/")[1]: metrics[key] for key in EVAL_KEYS if key in metrics}})
            last_success[0] = metrics.get("eval/success_rate", last_success[0])
            progress.update(done_steps + step, last_success[0])

        def on_update(step: int) -> None:
            if (done_steps + step) // training.checkpoint_freq > last_checkpoint[0] // \
                    training.checkpoint_freq:
                checkpoint(done_steps + step)

        try:
            final = train_onpolicy(
                algo, envs, eval_env, max(training.total_timesteps - done_steps, 1), log,
                rollout_steps=config.algorithm.rollout_steps, eval_freq=training.eval_freq,
                num_eval_episodes=training.num_eval_episodes, seed=training.seed + done_steps,
                on_update=on_update)
        finally:
            logger.close()
    per_update = config.algorithm.rollout_steps * envs.num_envs
    remaining = max(training.total_timesteps - done_steps, 1)
    steps = done_steps + per_update * -(-remaining // per_update)  # the loop ends past budget
    checkpoint(steps)
    summary = {"success_rate": final.get("eval/success_rate"),
               "mean_return": final.get("eval/mean_return"), "env_steps": steps,
               "wall_seconds": round(time.perf_counter() - started, 2),
               "seed": training.seed, "env": config.environment.name,
               "algorithm": config.algorithm.name, "eval_history": history}
    if safe:
        summary["safety"] = {"train": envs.monitor.summary(), "eval": eval_env.monitor.summary(),
                             "train_shield_interventions": envs.interventions,
                             "eval_shield_interventions": eval_env.interventions}
    write_summary(run_dir, summary)
    return summary
