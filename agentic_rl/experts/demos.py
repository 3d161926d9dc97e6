"""Record, save and load demonstrations (raw, unnormalised values; actions in env units).

File format (``.npz``, no pickled objects): per transition ``obs``, ``achieved_goal``,
``desired_goal``, ``action``, ``reward``, ``next_obs``, ``next_achieved_goal``, ``terminated``,
``truncated``, ``episode`` (index); per episode ``episode_success``, ``episode_return``,
``episode_length``; and ``env_id``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from agentic_rl.envs.make import make_env
from agentic_rl.experts import expert_for

STEP_FIELDS = ("obs", "achieved_goal", "desired_goal", "action", "reward", "next_obs",
               "next_achieved_goal", "terminated", "truncated")


class DemoError(ValueError):
    """A demonstration file is missing or malformed."""


def record_demos(env_id: str, episodes: int, seed: int = 0, env_kwargs: dict | None = None,
                 expert_kwargs: dict | None = None, successful_only: bool = True,
                 max_attempts_factor: int = 3, goal_region=None) -> dict[str, np.ndarray]:
    """Run the scripted expert until ``episodes`` episodes are recorded.

    With ``successful_only`` failed expert episodes are discarded (at most
    ``max_attempts_factor * episodes`` attempts). Episode ``k`` is reset with seed ``seed + k``.
    """
    env = make_env(env_id, env_kwargs, goal_region)
    expert = expert_for(env_id, **(expert_kwargs or {}))
    steps: dict[str, list[np.ndarray]] = {k: [] for k in STEP_FIELDS}
    kept, attempts, lengths, returns, successes = 0, 0, [], [], []
    while kept < episodes and attempts < max_attempts_factor * episodes:
        episode = {k: [] for k in STEP_FIELDS}
        obs, _ = env.reset(seed=seed + attempts)
        attempts += 1
        done, info = False, {}
        while not done:
            action = expert(obs)
            next_obs, reward, terminated, truncated, info = env.step(action)
            for key, value in (("obs", obs["observation"]), ("achieved_goal",
                               obs["achieved_goal"]), ("desired_goal", obs["desired_goal"]),
                               ("action", action), ("reward", reward),
                               ("next_obs", next_obs["observation"]),
                               ("next_achieved_goal", next_obs["achieved_goal"]),
                               ("terminated", terminated), ("truncated", truncated)):
                episode[key].append(np.asarray(value, dtype=np.float32))
            obs, done = next_obs, terminated or truncated
        success = bool(info.get("is_success", False))
        successes.append(success)
        if success or not successful_only:
            for key in STEP_FIELDS:
                steps[key].extend(episode[key])
            lengths.append(len(episode["reward"]))
            returns.append(float(np.sum(episode["reward"])))
            kept += 1
    env.close()
    if kept < episodes:
        raise RuntimeError(f"the {env_id} expert succeeded in only {sum(successes)} of "
                           f"{attempts} episodes; could not record {episodes} successful ones")
    arrays = {k: np.stack(v) for k, v in steps.items()}
    arrays["episode"] = np.repeat(np.arange(kept), lengths)
    arrays["episode_length"] = np.array(lengths)
    arrays["episode_return"] = np.array(returns, dtype=np.float32)
    arrays["episode_success"] = (np.ones(kept, dtype=bool) if successful_only
                                 else np.array(successes[:kept], dtype=bool))
    arrays["expert_success_rate"] = np.array(np.mean(successes), dtype=np.float32)
    arrays["env_id"] = np.array(env_id)
    return arrays


def save_demos(arrays: dict[str, np.ndarray], path: str | Path) -> None:
    """Write atomically (temporary file, then rename; several processes may record the same
    file at once, e.g. the trials of a sweep)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
    np.savez_compressed(temporary, **arrays)
    os.replace(temporary, path)


def load_demos(path: str | Path, env_id: str | None = None) -> dict[str, np.ndarray]:
    """Load and check a demo file; ``env_id`` (if given) must match the recorded one."""
    path = Path(path)
    if not path.is_file():
        raise DemoError(f"demonstration file {path} does not exist; create it with "
                        f"`agentic-rl demos --env ENV_ID --episodes 20 --out {path}`")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as error:  # zipfile/ValueError: truncated or not an npz
        raise DemoError(f"demonstration file {path} is unreadable ({error}); re-create it "
                        "with `agentic-rl demos`") from None
    missing = [k for k in (*STEP_FIELDS, "episode_length") if k not in arrays]
    if missing:
        raise DemoError(f"demonstration file {path} lacks {missing}; re-create it with "
                        "`agentic-rl demos`")
    recorded = str(arrays.get("env_id", ""))
    if env_id is not None and recorded and recorded.split("-")[0] != env_id.split("-")[0]:
        raise DemoError(f"demonstration file {path} was recorded on {recorded}, not {env_id}")
    return arrays


def split_episodes(arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Per-episode dicts of the step fields plus ``success`` and ``return``."""
    bounds = np.concatenate([[0], np.cumsum(arrays["episode_length"])])
    episodes = []
    for index in range(len(arrays["episode_length"])):
        part = slice(bounds[index], bounds[index + 1])
        episode = {k: arrays[k][part] for k in STEP_FIELDS}
        episode["success"] = bool(arrays["episode_success"][index]) if (
            "episode_success" in arrays) else True
        episode["return"] = float(episode["reward"].sum())
        episodes.append(episode)
    return episodes
