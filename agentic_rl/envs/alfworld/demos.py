"""Expert (and random) episodes on ALFWorld games, in parallel processes, with per-type success.

Demonstration files are ``.npz`` without pickled objects: per transition ``task``,
``observation``, ``inventory``, ``admissible_commands`` (joined by newlines), ``action`` (index),
``command``, ``reward``, ``terminated``, ``truncated``, ``episode``; per episode ``gamefile``,
``task_type``, ``episode_success``, ``episode_length``; and ``expert_success_rate``,
``success_by_type`` (JSON text) and ``env_id``.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np

STEP_KEYS = ("task", "observation", "inventory", "admissible_commands", "action", "command",
             "reward", "terminated", "truncated")


def play_episode(env: Any, game_index: int, policy: str, seed: int) -> dict[str, Any]:
    """Play one episode with the expert (``policy="expert"``) or uniformly random commands.

    The expert takes ``info["expert_command"]``; when it has none it takes ``look`` (what
    ALFWorld's expert wrapper falls back to).

    Returns:
        Dict with the step lists of :data:`STEP_KEYS`, ``gamefile``, ``task_type``, ``success``.
    """
    obs, info = env.reset(seed=seed, options={"game_index": game_index})
    rng = np.random.default_rng(seed)
    steps: dict[str, list] = {key: [] for key in STEP_KEYS}
    while True:
        commands = info["admissible_commands"]
        if policy == "expert":
            fallback = commands.index("look") if "look" in commands else 0
            action = info["expert_action"] if info["expert_action"] >= 0 else fallback
        else:
            action = int(rng.integers(len(commands)))
        for key, value in (("task", obs["task"]), ("observation", obs["observation"]),
                           ("inventory", obs["inventory"]),
                           ("admissible_commands", "\n".join(commands)),
                           ("action", action), ("command", commands[action])):
            steps[key].append(value)
        obs, reward, terminated, truncated, info = env.step(action)
        steps["reward"].append(reward)
        steps["terminated"].append(terminated)
        steps["truncated"].append(truncated)
        if terminated or truncated:
            return {**steps, "gamefile": info["gamefile"], "task_type": info["task_type"],
                    "success": bool(info["won"]), "plan_timed_out": info["plan_timed_out"]}


def _worker(job: tuple[dict[str, Any], list[int], str, int]) -> list[dict[str, Any]]:
    import torch

    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    torch.set_num_threads(1)
    env_kwargs, indices, policy, seed = job
    env = ALFWorldEnv(**{**env_kwargs, "expert": policy == "expert"})
    return [play_episode(env, index, policy, seed + index) for index in indices]


def run_episodes(env_kwargs: dict[str, Any], games: int | None, policy: str = "expert",
                 workers: int = 1, seed: int = 0) -> list[dict[str, Any]]:
    """Play one episode on each of ``games`` games of an env config, in parallel processes.

    Args:
        env_kwargs: arguments of ``ALFWorldEnv`` (split, data_path, games, max_steps, ...).
        games: how many games, a seeded random subset of the split (default: all of them).
        policy: ``"expert"`` or ``"random"``.
        workers: worker processes (1 runs in this process).
        seed: base seed (episode on game i uses ``seed + i``).

    Returns:
        The episodes, in game order.
    """
    from agentic_rl.envs.alfworld.data import list_games

    if "games" not in env_kwargs or not env_kwargs["games"]:
        all_games = list_games(env_kwargs.get("split", "train"), env_kwargs.get("data_path"),
                               env_kwargs.get("task_types"))
        env_kwargs = {**env_kwargs, "games": [str(g) for g in all_games]}
    total = len(env_kwargs["games"])
    count = min(games or total, total)
    # A seeded subset spread over the split (split folders are sorted by task type).
    chosen = sorted(np.random.default_rng(seed).choice(total, count, replace=False))
    env_kwargs = {**env_kwargs, "games": [env_kwargs["games"][i] for i in chosen]}
    chunks = [list(range(count))[w::workers] for w in range(max(1, workers))]
    jobs = [(env_kwargs, chunk, policy, seed) for chunk in chunks if chunk]
    if len(jobs) == 1:
        results = [_worker(jobs[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            results = pool.map(_worker, jobs)
    episodes = [episode for result in results for episode in result]
    order = {game: i for i, game in enumerate(env_kwargs["games"])}
    return sorted(episodes, key=lambda e: order[e["gamefile"]])


def success_by_type(episodes: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Success rate and count per task type, plus ``"all"``."""
    groups: dict[str, list[bool]] = collections.defaultdict(list)
    for episode in episodes:
        groups[episode["task_type"]].append(episode["success"])
        groups["all"].append(episode["success"])
    return {task: {"success_rate": float(np.mean(v)), "episodes": len(v)}
            for task, v in sorted(groups.items())}


def save_episodes(episodes: list[dict[str, Any]], path: str | Path, env_id: str,
                  successful_only: bool = True) -> dict[str, np.ndarray]:
    """Write episodes to an ``.npz`` demonstration file (see module docstring); returns arrays."""
    kept = [e for e in episodes if e["success"] or not successful_only]
    arrays: dict[str, np.ndarray] = {}
    for key in STEP_KEYS:
        values = [v for e in kept for v in e[key]]
        if key in ("action",):
            arrays[key] = np.asarray(values, dtype=np.int64)
        elif key in ("reward",):
            arrays[key] = np.asarray(values, dtype=np.float32)
        elif key in ("terminated", "truncated"):
            arrays[key] = np.asarray(values, dtype=bool)
        else:
            arrays[key] = np.asarray(values, dtype=np.str_)
    arrays["episode"] = np.asarray([i for i, e in enumerate(kept) for _ in e["action"]],
                                   dtype=np.int64)
    arrays["gamefile"] = np.asarray([e["gamefile"] for e in kept], dtype=np.str_)
    arrays["task_type"] = np.asarray([e["task_type"] for e in kept], dtype=np.str_)
    arrays["episode_success"] = np.asarray([e["success"] for e in kept], dtype=bool)
    arrays["episode_length"] = np.asarray([len(e["action"]) for e in kept], dtype=np.int64)
    stats = success_by_type(episodes)
    arrays["expert_success_rate"] = np.asarray(stats["all"]["success_rate"], dtype=np.float32)
    arrays["success_by_type"] = np.asarray(json.dumps(stats))
    arrays["env_id"] = np.asarray(env_id)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return arrays


def format_table(columns: dict[str, dict[str, dict[str, float]]]) -> str:
    """A text table: one row per task type, one success-rate column per named result."""
    tasks = sorted({task for stats in columns.values() for task in stats} - {"all"}) + ["all"]
    head = f"{'task type':<34}{'games':>6}" + "".join(f"{name:>10}" for name in columns)
    lines = [head]
    for task in tasks:
        first = next(stats[task] for stats in columns.values() if task in stats)
        row = f"{task:<34}{first['episodes']:>6}"
        row += "".join(f"{stats.get(task, {}).get('success_rate', float('nan')):>10.2f}"
                       for stats in columns.values())
        lines.append(row)
    return "\n".join(lines)
