"""One training run end to end: run folder, resume or transfer, loop, final evaluation, summary."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from agentic_rl.config import ConfigError, ExperimentConfig, dump_config, validate_config
from agentic_rl.train import state
from agentic_rl.data.checkpoint import (CheckpointError, has_checkpoint, latest_checkpoint,
                                        load_checkpoint, load_learner)
from agentic_rl.data.checkpoint import BEST_DIR, prefixed, write_summary
from agentic_rl.train.evaluate import evaluate
from agentic_rl.train.logger import open_logger, truncate_metrics
from agentic_rl.train.loop import keep_if_best, train_loop
from agentic_rl.train.setup import Run, build_run

TRANSFERRED_MODULES = ("actor.", "obs_normalizer.", "goal_normalizer.")


def training_part(section: Any) -> Any:
    """A config section less its evaluation-only keys (an algorithm config's
    ``training_part()``, where it has one): what must match for a run to resume."""
    part = getattr(section, "training_part", None)
    return part() if part is not None else section


def prepare_run_dir(config: ExperimentConfig, run_dir: Path, resume: bool,
                    init_from: str | Path | None = None) -> bool:
    """Create the run folder and save the resolved config; refuse to clobber an earlier run.
    Returns whether there is a checkpoint to resume from (``--resume`` on a run that stopped
    before its first checkpoint starts it again from step 0)."""
    checkpointed = has_checkpoint(run_dir)
    if resume and init_from is not None:
        raise ConfigError("--init-from starts a new run from another run's weights; it cannot "
                          "be combined with --resume (which continues this run's own)")
    if resume and (run_dir / "config.yaml").exists():
        saved = validate_config(yaml.safe_load((run_dir / "config.yaml").read_text()))
        for section in ("algorithm", "environment"):
            if training_part(getattr(saved, section)) != training_part(getattr(config, section)):
                raise ConfigError(f"--resume: the {section} section differs from the one in "
                                  f"{run_dir / 'config.yaml'}; resume with the same config "
                                  "(only training.* and evaluation-only keys may change)")
    if not resume and checkpointed:
        raise ConfigError(f"run folder {run_dir} already holds a run; pass --resume to "
                          "continue it, or choose another --log-dir or --seed")
    if not checkpointed and (run_dir / "metrics.csv").exists():
        print(f"{run_dir} holds no checkpoint (its run stopped before the first one); "
              "starting it again from step 0", file=sys.stderr)
        truncate_metrics(run_dir / "metrics.csv", -1)
    elif resume and not checkpointed:
        print(f"--resume: {run_dir} has no checkpoint yet; starting from step 0", file=sys.stderr)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(config, run_dir / "config.yaml")
    if init_from is not None:
        (run_dir / "init_from.json").write_text(json.dumps(
            {"init_from": str(Path(init_from).resolve()),
             "checkpoint": str(latest_checkpoint(init_from).resolve())}, indent=2))
    return resume and checkpointed


def transfer_from(run: Run, source_dir: str | Path) -> None:
    """Start from another run: a flat learner takes its actor, normalisers and prototypes
    (SPEC A4 transfer); other learners (text, on-policy, hierarchical) take the whole learner
    state (e.g. RL from an imitation run; the config says whether to imitate again)."""
    modules = getattr(run.algo, "modules", None)
    prototypes = getattr(run.storage, "prototypes", None)
    folder = latest_checkpoint(source_dir)
    if modules is None or prototypes is None:
        load_learner(run.algo, folder)
        return
    tensors, _, buffers = load_checkpoint(folder)
    actor_state = {k[len("algo."):]: v for k, v in tensors.items()
                   if k.startswith(tuple("algo." + m for m in TRANSFERRED_MODULES))}
    for name, module in modules().items():
        if name in ("actor", "obs_normalizer", "goal_normalizer"):
            part = {k[len(name) + 1:]: v for k, v in actor_state.items()
                    if k.startswith(name + ".")}
            try:
                module.load_state_dict(part)
            except RuntimeError as error:
                raise CheckpointError(f"--init-from {source_dir}: its {name} does not fit this "
                                      f"config ({str(error).splitlines()[0]}); the observation, "
                                      "goal and action sizes and algorithm.hidden_sizes must match")
    for name, buffer in prototypes.items():
        arrays = prefixed(buffers, f"storage/prototypes.{name}") or prefixed(
            buffers, "storage/prototypes.default")
        if arrays and int(arrays["num_episodes"]) > 0:
            transferred = type(buffer)(buffer.capacity, buffer.sampling)
            transferred.load_state_arrays(arrays)
            for episode, meta in zip(transferred.episodes, transferred.metadata):
                buffer.add_episode(episode, str(meta["source"]), task_id=str(meta["task_id"]),
                                   success=bool(meta["success"]),
                                   episode_return=float(meta["return"]),
                                   timestamp=float(meta["timestamp"]))


def workers_session(config: ExperimentConfig, address: str | None):
    """A Ray session while rollout workers need one (nothing otherwise)."""
    if not config.training.rollout_workers:
        return contextlib.nullcontext()
    from agentic_rl.train.ray_session import ray_session

    return ray_session(address)


def train(config: ExperimentConfig, run_dir: str | Path, resume: bool = False,
          init_from: str | Path | None = None, show_progress: bool = True,
          on_evaluation: Callable[[int, dict[str, float]], None] | None = None,
          address: str | None = None) -> dict:
    """Train, write ``summary.json`` and return it; ``on_evaluation(step, metrics)`` is called
    after each evaluation (``eval/success_rate`` and the other ``eval/`` metrics). With
    ``training.rollout_workers`` a local Ray starts for the run, or it attaches to the cluster
    at ``address`` (``auto`` or ``HOST:PORT``)."""
    if address is not None and not config.training.rollout_workers:
        raise ConfigError("--address attaches rollout workers to a Ray cluster; set "
                          "training.rollout_workers=N too")
    run_dir = Path(run_dir)
    resume = prepare_run_dir(config, run_dir, resume, init_from)
    run = build_run(config, run_dir)
    run.on_evaluation = on_evaluation
    if resume:
        folder = latest_checkpoint(run_dir)
        state.restore_run(run, folder)
        truncate_metrics(run_dir / "metrics.csv", run.step)
    elif init_from is not None:
        transfer_from(run, init_from)
    logger = open_logger(config, run_dir, purge_step=run.step if resume else None)
    try:
        with workers_session(config, address):
            train_loop(run, logger, show_progress)
        training, safety = config.training, run.safety
        if safety is not None:
            safety.eval_monitor.reset()  # summary.json reports the final evaluation alone
        result = evaluate(run.algo, run.eval_env, training.num_eval_episodes, training.seed,
                          shield=safety.eval_shield if safety else None,
                          monitor=safety.eval_monitor if safety else None)
        logger.log(run.step, {f"final/{k}": v for k, v in result.metrics("eval").items()})
        keep_if_best(run, result, final=True)
    finally:
        logger.close()
    summary = {"success_rate": result.success_rate, "mean_return": result.mean_return,
               "mean_length": result.mean_length, "env_steps": run.step,
               "wall_seconds": round(run.wall_seconds, 2), "seed": config.training.seed,
               "env": config.environment.name, "algorithm": config.algorithm.name,
               "eval_history": run.eval_history,
               "best_success_rate": max([row["success_rate"] for row in run.eval_history]
                                        + [result.success_rate]),  # in-run and final
               "best_model": str(run_dir / BEST_DIR) if (run_dir / BEST_DIR).exists() else None}
    if run.safety is not None:
        summary["safety"] = run.safety.summary()
    if run.collection_metrics is not None:
        summary["rollout_workers"] = {k.removeprefix("workers/"): int(v)
                                      for k, v in run.collection_metrics().items()}
    write_summary(run_dir, summary)
    return summary
