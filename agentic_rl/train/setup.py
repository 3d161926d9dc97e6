"""Build every part of a run of the shared loop from a validated config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agentic_rl.algos import LOOP_ALGORITHMS
from agentic_rl.algos.base import check_algorithm
from agentic_rl.config import ExperimentConfig
from agentic_rl.data.storage import StorageSpec
from agentic_rl.envs.curriculum import Curriculum
from agentic_rl.envs.goal import goal_functions
from agentic_rl.envs.make import make_env, make_vec_env
from agentic_rl.train.safety import Safety, build_safety, violation_reset


@dataclass
class Run:
    """Everything one training run holds (the loop's state)."""

    config: ExperimentConfig
    run_dir: Path
    envs: Any
    eval_env: Any
    algo: Any
    storage: Any  # data.storage.Storage
    curriculum: Curriculum
    rng: np.random.Generator
    sample_generator: torch.Generator
    step: int = 0
    episodes: int = 0
    recent_episodes: list[dict[str, float]] = field(default_factory=list)
    eval_history: list[dict[str, float]] = field(default_factory=list)
    wall_seconds: float = 0.0
    checkpoint_pending_since: int | None = None
    resume_reset_seeds: np.ndarray | None = None
    safety: Safety | None = None
    on_evaluation: Callable[[int, dict[str, float]], None] | None = None  # e.g. a sweep's report
    collection_metrics: Callable[[], dict[str, float]] | None = None  # e.g. worker restarts


def build_algo(config: ExperimentConfig, env) -> Any:
    """The learner ``algorithm.name`` names, for ``env``'s spaces, checked against the
    contract (``algos.base``)."""
    algo = LOOP_ALGORITHMS[config.algorithm.name].from_config(config, env)
    check_algorithm(algo)
    return algo


def build_envs(config: ExperimentConfig, part: tuple[int, int] | None = None
               ) -> tuple[Any, Any]:
    """``(training vector env without autoreset, evaluation env)``: the algorithm's own
    ``build_envs`` where it has one (text agents), else ``environment.*`` through Gymnasium.

    ``part=(index, count)``: the envs of rollout worker ``index`` of ``count``. An algorithm
    with its own ``build_envs`` splits its envs among the workers (a text agent's schedule
    slots); Gymnasium envs are not split: each worker runs ``environment.num_envs``."""
    custom = getattr(LOOP_ALGORITHMS[config.algorithm.name], "build_envs", None)
    if custom is not None:
        return custom(config, part)
    env_cfg = config.environment
    return (make_vec_env(env_cfg.name, env_cfg.num_envs, env_cfg.kwargs, env_cfg.goal_region,
                         violation_reset(config)),
            make_env(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region))


def envs_replicated(config: ExperimentConfig) -> bool:
    """Each rollout worker runs a copy of ``environment.num_envs`` envs (True), or a part of
    the algorithm's own envs (False: ``build_envs`` of text agents)."""
    return not hasattr(LOOP_ALGORITHMS[config.algorithm.name], "build_envs")


def horizon_of(env) -> int:
    """The env's episode step limit (its spec's, or its own ``max_episode_steps``; else 1000)."""
    if env.spec and env.spec.max_episode_steps:
        return int(env.spec.max_episode_steps)
    return int(getattr(env.unwrapped, "max_episode_steps", None) or 1000)


def build_run(config: ExperimentConfig, run_dir: Path) -> Run:
    """Construct envs, learner and its storage (demo files generated when missing)."""
    training, env_cfg = config.training, config.environment
    torch.set_num_threads(training.torch_threads)
    torch.manual_seed(training.seed)
    envs, eval_env = build_envs(config)
    algo = build_algo(config, eval_env)
    curriculum = Curriculum(env_cfg.curriculum)
    curriculum.apply(envs)
    curriculum.apply(eval_env)
    # the storage sees the rollout workers' envs side by side (see build_envs)
    num_envs = envs.num_envs * (max(training.rollout_workers, 1)
                                if envs_replicated(config) else 1)
    storage = algo.make_storage(StorageSpec(
        num_envs, training.buffer_size, horizon_of(eval_env), training.learning_starts,
        goal_functions(eval_env), training.seed, curriculum.task_id, env_cfg.name,
        dict(env_cfg.kwargs), env_cfg.goal_region, training.total_timesteps))
    run = Run(config, run_dir, envs, eval_env, algo, storage, curriculum,
              np.random.default_rng(training.seed), torch.Generator().manual_seed(training.seed))
    run.safety = build_safety(config, eval_env)
    return run
