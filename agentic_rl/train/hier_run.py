"""An HGPO run with SAC levels end to end: collect -> two replays (Worker steps, Manager
periods) -> SAC updates of both levels -> evaluate / log / checkpoint (``name: hgpo_sac``).

The Worker's replay holds one row per env step with the current subgoal as its desired goal
(reward and termination against the subgoal, from the env's own goal functions); the
Manager's replay holds one row per period: its start observation, the env goal, the subgoal
(its action), the env reward summed over the period and the observation where the period
ended. Both relabel goals with HER at sample time.

Checkpoints hold the learners and the step count; the replays are not saved, so a resumed
run refills them (as the on-policy runs restart their rollouts).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_rl.algos.hgpo_sac import HGPOSAC, level_input
from agentic_rl.collect.collector import Collector
from agentic_rl.config import ExperimentConfig
from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.envs.goal import GoalFunctions, goal_functions
from agentic_rl.envs.make import make_env, make_vec_env
from agentic_rl.train.checkpoint import (latest_checkpoint, load_learner, save_learner,
                                         write_summary)
from agentic_rl.train.evaluate import evaluate
from agentic_rl.train.logger import Logger, truncate_metrics
from agentic_rl.train.loop import RECENT_EPISODES, crossed, episode_metrics, her_kwargs
from agentic_rl.train.progress import Progress
from agentic_rl.train.setup import replay_shapes, resolve_device


def build_hgpo_sac(config: ExperimentConfig, env) -> HGPOSAC:
    """The learner for a single goal env's spaces."""
    space, action = env.observation_space, env.action_space
    spaces = {"obs": {k: int(np.prod(s.shape)) for k, s in space.spaces.items()},
              "goal_dim": int(np.prod(space["desired_goal"].shape)),
              "act_dim": int(np.prod(action.shape)),
              "action_low": action.low, "action_high": action.high}
    return HGPOSAC(config.algorithm, spaces, resolve_device(config.training.device),
                   config.environment.clip_obs, seed=config.training.seed)


def replay_for(level: Any, num_envs: int, capacity: int) -> ReplayBuffer:
    """A replay shaped for one ``SAC`` level (its input, goal and action sizes)."""
    return ReplayBuffer(capacity, num_envs, replay_shapes({
        "obs_dim": level.obs_normalizer.mean.shape[0], "act_dim": level.action_low.shape[0],
        "goal_dim": level.goal_normalizer.mean.shape[0]}))


class PeriodRecorder:
    """Turns env steps into Manager transitions, one per period, and hands over each env's
    transitions as an episode when it ends."""

    def __init__(self, num_envs: int) -> None:
        self.start: dict[str, torch.Tensor] = {}
        self.reward = torch.zeros(num_envs)
        self.episodes: list[list[dict[str, torch.Tensor]]] = [[] for _ in range(num_envs)]

    def step(self, manager_obs: torch.Tensor, manager_next_obs: torch.Tensor,
             transition: dict[str, torch.Tensor], extras: dict[str, torch.Tensor],
             period_end: torch.Tensor, episode_end: torch.Tensor) -> list[tuple[int, dict]]:
        """Record one env step; returns ``(env, episode fields [L, ...])`` of ended episodes.

        ``manager_obs`` / ``manager_next_obs [N, o]`` are the Manager's inputs before and after
        the step, ``period_end [N]`` marks the subgoal's last step."""
        new = extras["new_goal"]
        start = {"obs": manager_obs, "achieved_goal": transition["achieved_goal"],
                 "desired_goal": transition["desired_goal"], "action": extras["goal_unit"]}
        if not self.start:
            self.start = {k: v.clone() for k, v in start.items()}
        for key, value in start.items():
            self.start[key][new] = value[new]
        self.reward[new] = 0.0
        self.reward += transition["reward"]
        ended = []
        for env in torch.nonzero(period_end | episode_end).flatten().tolist():
            self.episodes[env].append({
                **{k: v[env].clone() for k, v in self.start.items()},
                "reward": self.reward[env].clone(),
                "next_obs": manager_next_obs[env],
                "next_achieved_goal": transition["next_achieved_goal"][env],
                "terminated": transition["terminated"][env]})
            if episode_end[env]:
                steps = self.episodes[env]
                ended.append((env, {k: torch.stack([s[k] for s in steps]) for k in steps[0]}))
                self.episodes[env] = []
        return ended


def worker_transition(algo: HGPOSAC, transition: dict[str, torch.Tensor],
                      extras: dict[str, torch.Tensor], goal_fns: GoalFunctions):
    """``(Worker row, Manager input before, Manager input after)`` of one env step."""
    keys_now = {"observation": transition["obs"], "achieved_goal": transition["achieved_goal"],
                "desired_goal": transition["desired_goal"]}
    keys_next = {"observation": transition["next_obs"],
                 "achieved_goal": transition["next_achieved_goal"],
                 "desired_goal": transition["desired_goal"]}
    goal, reached = extras["goal"], transition["next_achieved_goal"]
    row = {"obs": level_input(keys_now, algo.config.worker.obs_keys),
           "achieved_goal": transition["achieved_goal"], "desired_goal": goal,
           "action": extras["unit_action"], "reward": goal_fns.reward_fn(reached, goal),
           "next_obs": level_input(keys_next, algo.config.worker.obs_keys),
           "next_achieved_goal": reached,
           "terminated": (goal_fns.success_fn(reached, goal) if goal_fns.terminates_on_success
                          else torch.zeros(goal.shape[0]))}
    keys = algo.config.manager.obs_keys
    return row, level_input(keys_now, keys), level_input(keys_next, keys)


def sample(replay: ReplayBuffer, level_cfg, goal_fns: GoalFunctions,
           generator: torch.Generator) -> dict[str, torch.Tensor]:
    return replay.sample(level_cfg.batch_size, generator, **her_kwargs(level_cfg.her, goal_fns))


def train_hgpo_sac_run(config: ExperimentConfig, run_dir: Path, resume: bool = False,
                       show_progress: bool = True) -> dict:
    """Train, checkpoint, write ``summary.json`` and return it."""
    training, env_cfg, cfg = config.training, config.environment, config.algorithm
    torch.set_num_threads(training.torch_threads)
    torch.manual_seed(training.seed)
    envs = make_vec_env(env_cfg.name, env_cfg.num_envs, env_cfg.kwargs, env_cfg.goal_region)
    eval_env = make_env(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region)
    goal_fns, algo, num_envs = goal_functions(eval_env), build_hgpo_sac(config, eval_env), \
        env_cfg.num_envs
    horizon = eval_env.spec.max_episode_steps if eval_env.spec else 1000
    worker_replay = replay_for(algo.worker, num_envs,
                               max(training.buffer_size // num_envs, horizon + 1))
    manager_replay = replay_for(algo.manager, 1,
                                max(training.buffer_size // cfg.period, horizon + 1))
    step = 0
    if resume:
        step = int(load_learner(algo, latest_checkpoint(run_dir))["step"])
        truncate_metrics(run_dir / "metrics.csv", step)
    logger = Logger(run_dir, purge_step=step if resume else None)
    rng, generator = np.random.default_rng(training.seed + step), torch.Generator()
    generator.manual_seed(training.seed + step)
    collector, recorder = Collector(envs, rng), PeriodRecorder(num_envs)
    collector.reset_all()
    state, first = None, torch.ones(num_envs, dtype=torch.bool)
    owed, sums, counts = {"worker": 0.0, "manager": 0.0}, defaultdict(float), defaultdict(int)
    recent: list[dict[str, float]] = []
    history: list[dict[str, Any]] = []  # evaluations of this session
    started, clock, last_success = time.perf_counter(), (time.perf_counter(), step), float("nan")

    with Progress(training.total_timesteps, step, show_progress) as progress:
        try:
            while step < training.total_timesteps:
                action, state, extras = algo.act({**collector.obs, "is_first": first}, state,
                                                 uniform=step < training.learning_starts)
                transition, episode_end, finished = collector.step(action, extras["unit_action"])
                row, manager_obs, manager_next = worker_transition(algo, transition, extras,
                                                                   goal_fns)
                worker_replay.add(row, episode_end)
                period_end = state.step_in_period >= cfg.period
                for env, episode in recorder.step(manager_obs, manager_next, transition, extras,
                                                  period_end, episode_end):
                    manager_replay.add_episode(episode)
                    algo.observe(worker_replay.last_episode(env), episode)
                recent = (recent + [{"return": e.episode_return, "length": e.length,
                                     "success": float(e.success)} for e in finished])
                recent = recent[-RECENT_EPISODES:]
                first = episode_end
                previous, step = step, step + num_envs
                if step >= training.learning_starts and manager_replay.num_sampleable() > 0:
                    for level, replay in (("worker", worker_replay), ("manager", manager_replay)):
                        level_cfg = getattr(cfg, level)
                        owed[level] += num_envs / level_cfg.update_every
                        while owed[level] >= 1:
                            batch = {level: sample(replay, level_cfg, goal_fns, generator)}
                            for key, value in algo.update(batch).items():
                                sums[key], counts[key] = sums[key] + value, counts[key] + 1
                            owed[level] -= 1
                if crossed(previous, step, training.eval_freq):
                    result = evaluate(algo, eval_env, training.num_eval_episodes, training.seed)
                    last_success = result.success_rate
                    history.append({"step": step, **result.to_dict()})
                    logger.log(step, result.metrics())
                if crossed(previous, step, training.log_freq):
                    now = time.perf_counter()
                    logger.log(step, {**{k: v / counts[k] for k, v in sums.items()},
                                      **episode_metrics(recent),
                                      "time/fps": (step - clock[1]) / max(now - clock[0], 1e-9)})
                    sums, counts, clock = defaultdict(float), defaultdict(int), (now, step)
                if crossed(previous, step, training.checkpoint_freq):
                    save_learner(run_dir, step, algo, config.model_dump(mode="json"))
                progress.update(step, last_success)
            result = evaluate(algo, eval_env, training.num_eval_episodes, training.seed)
            logger.log(step, {f"final/{k}": v for k, v in result.metrics("eval").items()})
            save_learner(run_dir, step, algo, config.model_dump(mode="json"))
        finally:
            logger.close()
    summary = {"success_rate": result.success_rate, "mean_return": result.mean_return,
               "mean_length": result.mean_length, "env_steps": step,
               "wall_seconds": round(time.perf_counter() - started, 2),
               "seed": training.seed, "env": env_cfg.name, "algorithm": cfg.name,
               "eval_history": history}
    write_summary(run_dir, summary)
    return summary

