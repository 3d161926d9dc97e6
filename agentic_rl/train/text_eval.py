"""Greedy evaluation of a trained text agent (``agentic-rl eval`` for ``text_opd``): its model
folder (``models/alfworld``, ``RUN_DIR/best``) or latest checkpoint, on every game of a split,
through the shared evaluator (one episode per game)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import numpy as np

from agentic_rl.algos.text_opd import TextOPD, TextOPDConfig
from agentic_rl.collect.collector import EVAL_SEED_OFFSET
from agentic_rl.collect.game_schedule import SeedSchedule
from agentic_rl.collect.text_envs import text_env
from agentic_rl.config import ExperimentConfig
from agentic_rl.data.checkpoint import (BEST_DIR, MODEL_FILE, CheckpointError, latest_checkpoint,
                                        load_learner)
from agentic_rl.data.text_table import TextTable
from agentic_rl.train.evaluate import evaluate


def text_model_folder(path: str | Path) -> Path:
    """The weights to evaluate: ``path`` itself if it is a model folder (``models/alfworld``,
    ``RUN_DIR/best``), else the run's ``best/``, else its latest checkpoint."""
    path = Path(path)
    if (path / MODEL_FILE).exists():
        return path
    if (path / BEST_DIR / MODEL_FILE).exists():
        return path / BEST_DIR
    return latest_checkpoint(path)


def evaluate_text_model(config: ExperimentConfig, path: str | Path, data: str | Path,
                        split: str = "valid_seen", episodes: int | None = None,
                        seed: int = 12345) -> dict[str, Any]:
    """Greedy evaluation of a trained text agent on every game of a split (or the first
    ``episodes`` in sorted order), one episode per game.

    Without a Manager, or with a planner that does not read the solution, the env computes no
    expert at all; with the expert-plan planner the result is an oracle upper bound and the
    report says so (``"oracle": true``).
    """
    from agentic_rl.envs.alfworld.data import list_games, task_type_of
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder
    from agentic_rl.plan import build_planner

    algo: TextOPDConfig = config.algorithm  # type: ignore[assignment]
    folder = text_model_folder(path)
    games = [str(g) for g in list_games(split, data, config.environment.kwargs.get("task_types"))]
    count = min(episodes or len(games), len(games))
    table = TextTable(shared_encoder(), lazy=True)
    planner = build_planner(algo.manager, table)
    env = text_env(dict(config.environment.kwargs), games, table,
                   SeedSchedule(list(range(count)), seed + EVAL_SEED_OFFSET), algo,
                   planner=planner)
    learner = TextOPD.from_config(config, env)
    try:
        load_learner(learner, folder)
    except (KeyError, RuntimeError) as error:
        raise CheckpointError(f"{folder} does not hold this config's text policy: {error}") from None
    start = time.time()
    result = evaluate(learner, env, count, seed)
    types = [task_type_of(Path(g)) for g in games[:count]]
    return {"model": str(folder), "data": str(data), "split": split,
            "oracle": bool(planner is not None and planner.needs_expert),
            **success_table(result.successes, result.lengths, types),
            "wall_seconds": round(time.time() - start, 1)}


def success_table(successes: list[bool], lengths: list[int], types: list[str]
                  ) -> dict[str, Any]:
    """``{"success_rate", "mean_steps", "episodes", "per_task_type": {type: {...}}}``."""
    by_type: dict[str, list[int]] = collections.defaultdict(list)
    for index, task_type in enumerate(types):
        by_type[task_type].append(index)

    def stats(rows: list[int]) -> dict[str, float]:
        return {"success_rate": float(np.mean([successes[i] for i in rows])),
                "mean_steps": float(np.mean([lengths[i] for i in rows])), "episodes": len(rows)}

    return {**stats(list(range(len(successes)))),
            "per_task_type": {k: stats(v) for k, v in sorted(by_type.items())}}
