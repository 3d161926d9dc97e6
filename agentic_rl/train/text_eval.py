"""Greedy evaluation of a trained text agent (``agentic-rl eval`` for ``text_opd``): its model
folder (``models/alfworld``, ``RUN_DIR/best``) or latest checkpoint, on every game of a split."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agentic_rl.algos.text_opd import TextOPDConfig
from agentic_rl.config import ExperimentConfig
from agentic_rl.data.checkpoint import MODEL_FILE, CheckpointError, latest_checkpoint, load_learner
from agentic_rl.train.text_run import (BEST_DIR, build_text_envs, build_text_learner,
                                       evaluate_games, text_collector)


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
                        seed: int = 12345, width: int = 16) -> dict[str, Any]:
    """Greedy evaluation of a trained text agent on every game of a split (or the first
    ``episodes`` in sorted order), one episode per game.

    Without a Manager, or with a planner that does not read the solution, the envs compute no
    expert at all; with the expert-plan planner the result is an oracle upper bound and the
    report says so (``"oracle": true``).
    """
    from agentic_rl.envs.alfworld.data import list_games
    from agentic_rl.plan import build_planner

    algo: TextOPDConfig = config.algorithm  # type: ignore[assignment]
    folder = text_model_folder(path)
    learner, table = build_text_learner(config)
    try:
        load_learner(learner, folder)
    except (KeyError, RuntimeError) as error:
        raise CheckpointError(f"{folder} does not hold this config's text policy: {error}") from None
    learner.policy.eval()
    games = [str(g) for g in list_games(split, data, config.environment.kwargs.get("task_types"))]
    indices = list(range(len(games)))[: episodes or None]
    planner = build_planner(algo.manager)
    oracle = bool(planner is not None and planner.needs_expert)
    envs = build_text_envs(config, min(width, len(indices)), games, expert=oracle)
    collector = text_collector(algo, envs, table, learner, planner)
    start = time.time()
    result = evaluate_games(collector, indices, seed)
    return {"model": str(folder), "data": str(data), "split": split, "oracle": oracle,
            **result, "wall_seconds": round(time.time() - start, 1)}
