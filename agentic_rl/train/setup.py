"""Build every part of an off-policy run from a validated config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.algos import OFF_POLICY
from agentic_rl.algos.skills import SkillManager
from agentic_rl.config import ConfigError, ExperimentConfig
from agentic_rl.data.prototypes import PrototypeBuffer
from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.envs.curriculum import Curriculum
from agentic_rl.envs.goal import GoalFunctions, goal_functions, is_goal_env
from agentic_rl.envs.make import EnvError, make_env, make_vec_env
from agentic_rl.experts import has_expert
from agentic_rl.experts.demos import load_demos, record_demos, save_demos, split_episodes
from agentic_rl.train.safety import Safety, build_safety

DEFAULT_SKILL = "default"


@dataclass
class Run:
    """Everything one training run holds (the loop's state)."""

    config: ExperimentConfig
    run_dir: Path
    envs: Any
    eval_env: Any
    algo: Any
    goal_fns: GoalFunctions
    replay: ReplayBuffer
    demo_replay: ReplayBuffer | None
    prototypes: dict[str, PrototypeBuffer]
    skills: SkillManager
    curriculum: Curriculum
    rng: np.random.Generator
    sample_generator: torch.Generator
    step: int = 0
    episodes: int = 0
    current_skills: list[str] = field(default_factory=list)
    recent_episodes: list[dict[str, float]] = field(default_factory=list)
    eval_history: list[dict[str, float]] = field(default_factory=list)
    wall_seconds: float = 0.0
    collector_goals: torch.Tensor | None = None  # current episodes' goals (goal-nearest sampling)
    checkpoint_pending_since: int | None = None
    resume_reset_seeds: np.ndarray | None = None
    safety: Safety | None = None


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("training.device is 'cuda' but torch sees no CUDA device; use "
                           "training.device=cpu or auto")
    return name


def spaces_of(env) -> dict[str, Any]:
    """Dimensions and action bounds the off-policy learners are built from."""
    space = env.observation_space
    if not is_goal_env(env) or not isinstance(env.action_space, gym.spaces.Box):
        raise EnvError(f"SAC/OPD need a Box (or goal Dict) observation space and a Box action "
                       f"space; {env.spec.id if env.spec else env} has {space} and "
                       f"{env.action_space} (use ppo or hgpo for discrete actions)")
    return {"obs_dim": int(np.prod(space["observation"].shape)),
            "goal_dim": int(np.prod(space["desired_goal"].shape)),
            "act_dim": int(np.prod(env.action_space.shape)),
            "action_low": env.action_space.low, "action_high": env.action_space.high}


def build_algo(config: ExperimentConfig, spaces: dict[str, Any]):
    env_cfg = config.environment
    cls = OFF_POLICY[config.algorithm.name]
    return cls(config.algorithm, config.agent, spaces, resolve_device(config.training.device),
               env_cfg.clip_obs, (env_cfg.normalize_obs, env_cfg.normalize_goal))


def build_run(config: ExperimentConfig, run_dir: Path) -> Run:
    """Construct envs, learner, buffers and prototypes (demo files generated when missing)."""
    training, env_cfg = config.training, config.environment
    torch.set_num_threads(training.torch_threads)
    torch.manual_seed(training.seed)
    envs = make_vec_env(env_cfg.name, env_cfg.num_envs, env_cfg.kwargs, env_cfg.goal_region)
    eval_env = make_env(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region)
    spaces = spaces_of(eval_env)
    algo = build_algo(config, spaces)
    horizon = eval_env.spec.max_episode_steps if eval_env.spec else None
    capacity = max(training.buffer_size // env_cfg.num_envs, (horizon or 1) + 1)
    replay = ReplayBuffer(capacity, env_cfg.num_envs, replay_shapes(spaces))
    skill_names = [s.name for s in config.agent.skills] or [DEFAULT_SKILL]
    skills = SkillManager(skill_names, config.agent.skill_selection,
                          {s.name: s.task_ids for s in config.agent.skills})
    prototypes = {name: PrototypeBuffer(config.agent.prototype_capacity,
                                        config.agent.prototype_sampling) for name in skill_names}
    curriculum = Curriculum(env_cfg.curriculum)
    curriculum.apply(envs)
    curriculum.apply(eval_env)
    run = Run(config, run_dir, envs, eval_env, algo, goal_functions(eval_env), replay, None,
              prototypes, skills, curriculum, np.random.default_rng(training.seed),
              torch.Generator().manual_seed(training.seed))
    run.current_skills = [skills.select(curriculum.task_id) for _ in range(env_cfg.num_envs)]
    run.safety = build_safety(config, eval_env)
    if config.algorithm.name == "opd" or config.agent.prototype_data_path:
        load_prototypes(run, spaces)
    return run


def replay_shapes(spaces: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    obs, goal, act = (spaces["obs_dim"],), (spaces["goal_dim"],), (spaces["act_dim"],)
    return {"obs": obs, "next_obs": obs, "achieved_goal": goal, "desired_goal": goal,
            "next_achieved_goal": goal, "action": act}


def demo_path_for(config: ExperimentConfig, skill) -> Path | None:
    path = skill.prototype_data_path if skill is not None else config.agent.prototype_data_path
    if isinstance(path, list):
        raise ConfigError("agent.prototype_data_path takes one .npz file for SAC/OPD (lists "
                          "of files are for text agents)")
    return Path(path) if path else None


def load_prototypes(run: Run, spaces: dict[str, Any]) -> None:
    """Fill each skill's prototype buffer (and the demo replay) from its demonstration file,
    recording the file with the scripted expert first when it does not exist yet."""
    config = run.config
    skills = config.agent.skills or [None]
    episodes_for_replay = []
    for skill in skills:
        name = skill.name if skill is not None else DEFAULT_SKILL
        path = demo_path_for(config, skill)
        if path is None:
            raise ValueError(f"OPD needs prototypes: set agent.prototype_data_path (or "
                             f"prototype_data_path of skill {name!r}) to a demo .npz file")
        if not path.exists() and has_expert(config.environment.name):
            arrays = record_demos(config.environment.name, config.agent.prototype_episodes,
                                  seed=config.training.seed + 10_000_000,
                                  env_kwargs=config.environment.kwargs,
                                  expert_kwargs=skill.expert_kwargs if skill else None,
                                  goal_region=config.environment.goal_region)
            save_demos(arrays, path)
        arrays = load_demos(path, config.environment.name)
        for episode in split_episodes(arrays):
            tensors = {k: torch.as_tensor(v) for k, v in episode.items()
                       if isinstance(v, np.ndarray)}
            tensors["action"] = run.algo.env_to_unit(tensors["action"])
            if episode["success"]:
                run.prototypes[name].add_episode(tensors, "expert", task_id=name,
                                                 episode_return=episode["return"])
            episodes_for_replay.append(tensors)
    observed = {"observation": torch.cat([e["obs"] for e in episodes_for_replay]),
                "desired_goal": torch.cat([e["desired_goal"] for e in episodes_for_replay]),
                "achieved_goal": torch.cat([e["achieved_goal"] for e in episodes_for_replay])}
    run.algo.observe(observed)
    if config.agent.prototypes_in_replay:
        total = sum(int(e["reward"].shape[0]) for e in episodes_for_replay)
        run.demo_replay = ReplayBuffer(total, 1, replay_shapes(spaces))
        for episode in episodes_for_replay:
            run.demo_replay.add_episode(episode)
