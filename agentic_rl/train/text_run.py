"""Training run of a text agent (``algorithm.name: text_opd``) on ALFWorld.

Data flow (DESIGN.md): envs -> :class:`~agentic_rl.collect.text_collector.TextCollector` ->
episodes (+ prototype episodes) -> ``TextOPD.update`` -> logger / checkpoints.

1. Prototypes: expert demonstrations (``algorithm.prototype_data_path``) and, later, the agent's own
   successful episodes (up to ``self_prototype_capacity``).
2. ``bc_steps`` imitation steps (cross-entropy only), then ``dagger_rounds`` DAgger rounds: the
   policy plays train games, the expert labels the states it reached, imitation goes on.
3. Until ``training.total_timesteps`` env steps: ``games_per_iteration`` train games, each played
   ``group_size`` times by the sampling policy, one ``update``.
4. Every ``training.eval_freq`` env steps (and after imitation): greedy evaluation on
   ``holdout_games`` train games that are neither demonstrated nor trained on; the best
   evaluated policy is kept in ``RUN_DIR/best`` (model selection never sees valid_seen).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from agentic_rl.algos.text_opd import TextOPD, TextOPDConfig
from agentic_rl.collect.text_collector import TextCollector, success_table
from agentic_rl.config import ConfigError, ExperimentConfig
from agentic_rl.data.text_episodes import TextEpisode, episodes_from_demos, expert_relabelled
from agentic_rl.data.text_table import TextTable
from agentic_rl.envs.make import check_text_env
from agentic_rl.data.checkpoint import (MODEL_FILE, STATE_FILE, flatten_state,
                                         latest_checkpoint, load_learner, save_checkpoint,
                                         write_summary)
from agentic_rl.train.logger import Logger, open_logger
from agentic_rl.train.progress import Progress

BEST_DIR = "best"


def build_text_envs(config: ExperimentConfig, count: int, games: list[str] | None = None,
                    expert: bool = False, use_planner: bool | None = None) -> list:
    """``count`` ALFWorld envs over ``games`` (default: the configured split)."""
    from agentic_rl.envs.alfworld import make_alfworld_env

    kwargs = {k: v for k, v in config.environment.kwargs.items() if k != "expert"}
    if games is not None:
        kwargs["games"] = games
    if use_planner is not None:
        kwargs["use_planner"] = use_planner
    return [make_alfworld_env(**kwargs, encode=False, expert=expert) for _ in range(count)]


def text_collector(algo: TextOPDConfig, envs: list, table: TextTable, learner: TextOPD, planner,
                   expert_labels: bool = False) -> TextCollector:
    """A collector with the config's Manager period and command limit."""
    return TextCollector(envs, table, learner, planner,
                         algo.manager.period if algo.manager else 5, algo.max_commands,
                         expert_labels)


def build_text_learner(config: ExperimentConfig) -> tuple[TextOPD, TextTable]:
    """The learner and a text table backed by the shared MiniLM encoder."""
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder

    algo: TextOPDConfig = config.algorithm  # type: ignore[assignment]
    table = TextTable(shared_encoder())
    generator = torch.Generator().manual_seed(config.training.seed)
    return TextOPD(algo, table.dim, generator), table


class PrototypeEpisodes:
    """Expert episodes plus the newest ``capacity`` self-successes; uniform episode sampling."""

    def __init__(self, expert: list[TextEpisode], capacity: int, rng: np.random.Generator):
        self.expert, self.own, self.capacity, self.rng = expert, [], capacity, rng

    def add(self, episode: TextEpisode) -> None:
        if self.capacity > 0:
            episode.source = "self"
            self.own = (self.own + [episode])[-self.capacity:]

    def sample(self, count: int) -> list[TextEpisode]:
        pool = self.expert + self.own
        return [pool[i] for i in self.rng.integers(len(pool), size=count)] if pool else []


def split_games(config: ExperimentConfig, demo_games: set[str]) -> tuple[list[str], list[int],
                                                                         list[int]]:
    """All games of the configured split, the indices to train on, and the holdout indices
    (a seeded choice among games without demonstrations)."""
    from agentic_rl.envs.alfworld.data import list_games

    kwargs = config.environment.kwargs
    games = [str(g) for g in list_games(kwargs.get("split", "train"), kwargs.get("data_path"),
                                        kwargs.get("task_types"))]
    rng = np.random.default_rng(config.training.seed)
    free = [i for i, g in enumerate(games) if g not in demo_games]
    count = min(config.algorithm.holdout_games, len(free))
    holdout = sorted(int(i) for i in rng.choice(free, count, replace=False)) if count else []
    keep = set(holdout)
    return games, [i for i in range(len(games)) if i not in keep], holdout


def evaluate_games(collector: TextCollector, indices: list[int], seed: int) -> dict[str, Any]:
    """Greedy episodes on the given games, ``len(collector.envs)`` at a time."""
    episodes: list[TextEpisode] = []
    width = len(collector.envs)
    for start in range(0, len(indices), width):
        chunk = indices[start : start + width]
        episodes += collector.play(chunk, [seed + i for i in chunk], deterministic=True)
    return success_table(episodes)


def save_model(folder: Path, learner: TextOPD, extra: dict[str, Any]) -> None:
    """The policy weights alone (what ``eval`` and ``models/`` need), replaced atomically."""
    tensors, skeleton = flatten_state({"policy": learner.policy.state_dict()})
    temporary = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(temporary / MODEL_FILE))
    (temporary / STATE_FILE).write_text(json.dumps({"algo": skeleton, **extra}))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(temporary, folder)


def dagger(learner: TextOPD, table: TextTable, prototypes: PrototypeEpisodes,
           config: ExperimentConfig, games: list[str], train_ids: list[int], planner,
           rng: np.random.Generator, logger: Logger, subgoals) -> None:
    """DAgger rounds (Ross et al. 2011): the current policy plays train games greedily, the
    handcoded expert labels every state it reaches, the labelled episodes join the expert
    prototypes, and imitation continues on all of them. Training-time only: the expert is
    never consulted at evaluation."""
    algo: TextOPDConfig = config.algorithm  # type: ignore[assignment]
    # the handcoded expert labels every step; the per-game Fast Downward plan is not needed
    envs = build_text_envs(config, algo.dagger_games, games, expert=True, use_planner=False)
    labeller = text_collector(algo, envs, table, learner, planner, expert_labels=True)
    labelled_steps = 0
    for round_ in range(algo.dagger_rounds):
        chosen = [int(g) for g in rng.choice(train_ids, algo.dagger_games, replace=False)]
        seeds = [int(s) for s in rng.integers(2**31, size=len(chosen))]
        episodes = labeller.play(chosen, seeds, deterministic=True)
        relabelled = [r for e in episodes if (r := expert_relabelled(e, table)) is not None]
        prototypes.expert += relabelled
        labelled_steps += sum(len(r) for r in relabelled)
        for _ in range(algo.dagger_steps):
            metrics = learner.imitation_step(
                table.tensor(), prototypes.sample(algo.distill_batch_episodes), subgoals())
        logger.log(round_, {**(metrics if algo.dagger_steps else {}),
                            "dagger/rollout_success_rate": success_table(episodes)["success_rate"],
                            "dagger/labelled_steps": labelled_steps,
                            "dagger/prototype_episodes": len(prototypes.expert)})


def train_text_run(config: ExperimentConfig, run_dir: Path, resume: bool = False,
                   show_progress: bool = True, init_from: str | Path | None = None,
                   on_evaluation=None) -> dict:
    """Run the whole training; write ``summary.json`` and return it."""
    algo: TextOPDConfig = config.algorithm  # type: ignore[assignment]
    training = config.training
    check_text_env(config.environment.name)
    torch.manual_seed(training.seed)
    torch.set_num_threads(training.torch_threads)
    start_time = time.time()
    learner, table = build_text_learner(config)
    if not algo.prototype_data_path:
        raise ConfigError("text_opd needs algorithm.prototype_data_path: an ALFWorld demonstration "
                          "file from `agentic-rl demos --env agentic_rl/ALFWorld-v0`")
    paths = algo.prototype_data_path
    demos = [e for path in ([paths] if isinstance(paths, str) else paths)
             for e in episodes_from_demos(path, table, algo.max_commands) if e.success]
    if algo.manager is not None:  # the expert reaches its planner subgoal on every step
        for e in demos:
            e.subgoal = e.commands[np.arange(len(e)), e.action]
    rng = np.random.default_rng(training.seed)
    prototypes = PrototypeEpisodes(demos, algo.self_prototype_capacity, rng)
    games, train_ids, holdout_ids = split_games(config, {e.game for e in demos})
    from agentic_rl.plan import build_planner

    planner = build_planner(algo.manager)
    needs_expert = bool(planner is not None and planner.needs_expert)
    width = algo.games_per_iteration * algo.group_size
    collector = text_collector(algo, build_text_envs(config, width, games, needs_expert), table,
                               learner, planner)
    subgoals = (lambda: table.tensor()) if algo.manager is not None else (lambda: None)
    step = iteration = 0
    best = -1.0
    history: list[dict[str, Any]] = []
    if resume:
        meta = load_learner(learner, latest_checkpoint(run_dir))
        step, iteration, best = meta["step"], meta["iteration"], meta["best"]
        history = meta["eval_history"]
    elif init_from is not None:
        load_learner(learner, latest_checkpoint(init_from))
    logger = open_logger(config, run_dir, purge_step=step if resume else None)

    def evaluate_and_keep() -> None:
        nonlocal best
        result = evaluate_games(collector, holdout_ids, training.seed + 10_000)
        history.append({"step": step, "iteration": iteration, **result})
        metrics = {"eval/success_rate": result["success_rate"],
                   "eval/mean_steps": result["mean_steps"]}
        logger.log(step, metrics)
        if on_evaluation is not None:
            on_evaluation(step, metrics)
        if result["success_rate"] >= best:
            best = result["success_rate"]
            save_model(run_dir / BEST_DIR, learner, {"step": step, "holdout": result})

    def checkpoint() -> None:
        tensors, skeleton = flatten_state(learner.state_dict())
        save_checkpoint(run_dir / "checkpoints", step, tensors,
                        {"algo": skeleton, "step": step, "iteration": iteration, "best": best,
                         "eval_history": history}, {})

    try:
        with Progress(training.total_timesteps, step, show_progress) as progress:
            if not resume and init_from is None and algo.bc_steps:
                for i in range(algo.bc_steps):
                    metrics = learner.imitation_step(
                        table.tensor(), prototypes.sample(algo.distill_batch_episodes),
                        subgoals())
                    if (i + 1) % 100 == 0:
                        logger.log(step, {**metrics, "train/bc_step": i + 1})
                if algo.dagger_rounds:
                    dagger(learner, table, prototypes, config, games, train_ids, planner, rng,
                           logger, subgoals)
                if holdout_ids:
                    evaluate_and_keep()
                checkpoint()
            last_eval = step
            while algo.rl != "none" and step < training.total_timesteps:
                chosen = rng.choice(train_ids, algo.games_per_iteration, replace=False)
                game_list = [int(g) for g in chosen for _ in range(algo.group_size)]
                seeds = [int(s) for s in rng.integers(2**31, size=len(game_list))]
                episodes = collector.play(game_list, seeds)
                step += sum(len(e) for e in episodes)
                iteration += 1
                metrics = learner.update(table.tensor(), episodes, prototypes.sample, subgoals())
                for e in episodes:
                    if e.success:
                        prototypes.add(e)
                rollout = success_table(episodes)
                logger.log(step, {**metrics, "rollout/success_rate": rollout["success_rate"],
                                  "rollout/mean_steps": rollout["mean_steps"],
                                  "train/self_prototypes": len(prototypes.own),
                                  "time/wall_seconds": time.time() - start_time})
                if holdout_ids and step - last_eval >= training.eval_freq:
                    evaluate_and_keep()
                    last_eval = step
                    checkpoint()
                progress.update(step, history[-1]["success_rate"] if history else float("nan"))
            if holdout_ids and (not history or history[-1]["step"] != step):
                evaluate_and_keep()
            checkpoint()
    finally:
        logger.close()
    summary = {"best_holdout_success": best, "env_steps": step, "iterations": iteration,
               "wall_seconds": round(time.time() - start_time, 1), "seed": training.seed,
               "algorithm": algo.name, "rl": algo.rl, "advantage": algo.advantage,
               "eval_history": history, "best_model": str(run_dir / BEST_DIR)}
    write_summary(run_dir, summary)
    return summary
