"""The explicit on-policy loop: collect ``rollout_steps`` x ``N`` steps, ``algo.update``, evaluate.

Works with any gymnasium ``VectorEnv`` created with ``autoreset_mode=SAME_STEP`` (and with
``envs.gridworld.BatchGridWorld``, which uses it natively). The loop keeps ``terminated`` and
``truncated`` apart and stores the true final observation of every ended episode as its
``next_obs``, so algorithms bootstrap truncated episodes correctly. It adds two observation parts
the algorithm may use: ``is_first [N]`` (first step of an episode; HGPO starts a new goal there)
and ``action_mask [N, A]`` when the env reports one in ``info``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.algos.base import Algorithm
from agentic_rl.data.rollout import RolloutBuffer

LogFn = Callable[[int, dict[str, float]], None]


def to_tensors(
    obs: dict[str, np.ndarray], info: dict[str, Any], is_first: np.ndarray
) -> dict[str, torch.Tensor]:
    """Numpy vector observation -> tensors, plus ``is_first`` and ``action_mask`` when present."""
    out = {key: torch.as_tensor(np.asarray(value, dtype=np.float32)) for key, value in obs.items()}
    out["is_first"] = torch.as_tensor(is_first, dtype=torch.bool)
    if "action_mask" in info:
        out["action_mask"] = torch.as_tensor(np.asarray(info["action_mask"]), dtype=torch.bool)
    return out


def true_next_obs(
    obs: dict[str, np.ndarray], info: dict[str, Any], done: np.ndarray
) -> dict[str, np.ndarray]:
    """``obs`` with the rows of ended episodes replaced by their final observation."""
    if not done.any():
        return obs
    final = info["final_obs"]
    out = {key: np.array(value, copy=True) for key, value in obs.items()}
    for key in out:
        if isinstance(final, dict):  # BatchGridWorld: dict of [N, ...] arrays
            out[key][done] = final[key][done]
        else:  # gymnasium vector envs: object array of per-env dicts
            for index in np.flatnonzero(done):
                out[key][index] = final[index][key]
    return out


def episode_success(info: dict[str, Any], done: np.ndarray) -> np.ndarray:
    """``is_success`` of the ended episodes, ``[num_done]`` bool."""
    source = info.get("final_info", info)
    success = source.get("is_success", np.zeros(len(done), bool))
    return np.asarray(success, dtype=bool)[done]


def _check_autoreset(envs: gym.vector.VectorEnv) -> None:
    mode = envs.metadata.get("autoreset_mode")
    if mode != gym.vector.AutoresetMode.SAME_STEP:
        raise ValueError(
            f"on-policy loop needs a vector env with autoreset_mode=SAME_STEP, got {mode}; "
            "create it with gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)"
        )


def evaluate(
    algo: Algorithm,
    env: gym.vector.VectorEnv,
    num_episodes: int,
    seed: int,
    deterministic: bool = True,
) -> dict[str, float]:
    """Evaluation (deterministic by default): each of the ``N`` envs runs
    ``ceil(num_episodes / N)`` episodes; ``deterministic=False`` samples from the policy.

    Returns:
        ``eval/success_rate``, ``eval/mean_return``, ``eval/mean_length`` over the episodes.
    """
    _check_autoreset(env)
    quota = -(-num_episodes // env.num_envs)
    obs, info = env.reset(seed=seed)
    is_first = np.ones(env.num_envs, bool)
    counts = np.zeros(env.num_envs, int)
    ret, length = np.zeros(env.num_envs), np.zeros(env.num_envs, int)
    results: list[tuple[float, float, float]] = []
    state = None
    while (counts < quota).any():
        action, state, _ = algo.act(to_tensors(obs, info, is_first), state,
                                    "deterministic" if deterministic else "explore")
        obs, reward, term, trunc, info = env.step(action.numpy())
        ret, length = ret + reward, length + 1
        done = term | trunc
        for index, success in zip(np.flatnonzero(done), episode_success(info, done)):
            if counts[index] < quota:
                results.append((float(success), ret[index], length[index]))
                counts[index] += 1
        ret[done], length[done], is_first = 0.0, 0, done
    success, returns, lengths = np.array(results[:num_episodes]).T
    return {
        "eval/success_rate": float(success.mean()),
        "eval/mean_return": float(returns.mean()),
        "eval/mean_length": float(lengths.mean()),
    }


def train_onpolicy(
    algo: Algorithm,
    envs: gym.vector.VectorEnv,
    eval_env: gym.vector.VectorEnv | None,
    total_steps: int,
    log: LogFn,
    rollout_steps: int = 128,
    eval_freq: int = 10_000,
    num_eval_episodes: int = 10,
    seed: int = 0,
    on_update: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Train ``algo`` for ``total_steps`` env steps (summed over the ``N`` envs).

    Args:
        algo: an on-policy learner whose ``update`` takes a ``data.rollout.Rollout``.
        envs: training vector env (``SAME_STEP`` autoreset).
        eval_env: evaluation vector env, or None to skip evaluation.
        total_steps: env-step budget; training stops at the first update past it.
        log: called as ``log(step, metrics)`` after each update and each evaluation.
        rollout_steps: steps per env between updates.
        eval_freq: evaluate every this many env steps (and once at the end).
        num_eval_episodes: episodes per evaluation.
        seed: seeds the env resets.
        on_update: called with the step count after each update (e.g. to checkpoint).

    Returns:
        The metrics of the last evaluation (or of the last update without ``eval_env``).
    """
    _check_autoreset(envs)
    num_envs = envs.num_envs
    buffer = RolloutBuffer(rollout_steps)
    obs, info = envs.reset(seed=seed)
    is_first = np.ones(num_envs, bool)
    ep_return, ep_length = np.zeros(num_envs), np.zeros(num_envs, int)
    recent: deque[tuple[float, float, float]] = deque(maxlen=100)
    state, step, next_eval, last = None, 0, eval_freq, {}
    start = time.perf_counter()
    while step < total_steps:
        for _ in range(rollout_steps):
            tensors = to_tensors(obs, info, is_first)
            action, state, extras = algo.act(tensors, state, "explore")
            next_obs, reward, term, trunc, next_info = envs.step(action.numpy())
            done = term | trunc
            final_obs = true_next_obs(next_obs, next_info, done)
            final = to_tensors(final_obs, info, np.zeros(num_envs, bool))
            buffer.add(
                tensors, final, action, torch.as_tensor(reward, dtype=torch.float32),
                torch.as_tensor(term), torch.as_tensor(trunc), extras,
            )
            ep_return, ep_length = ep_return + reward, ep_length + 1
            for index, success in zip(np.flatnonzero(done), episode_success(next_info, done)):
                recent.append((float(success), ep_return[index], ep_length[index]))
            ep_return[done], ep_length[done] = 0.0, 0
            obs, info, is_first = next_obs, next_info, done
        step += rollout_steps * num_envs
        last = algo.update(buffer.get())
        buffer.reset()
        if recent:
            success, returns, lengths = np.array(recent).T
            last |= {
                "rollout/success_rate": float(success.mean()),
                "rollout/ep_rew_mean": float(returns.mean()),
                "rollout/ep_len_mean": float(lengths.mean()),
            }
        last["time/fps"] = step / (time.perf_counter() - start)
        log(step, last)
        if on_update is not None:
            on_update(step)
        if eval_env is not None and (step >= next_eval or step >= total_steps):
            last = evaluate(algo, eval_env, num_eval_episodes, seed + 10_000)
            log(step, last)
            next_eval += eval_freq
    return last
