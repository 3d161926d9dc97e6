"""Deterministic evaluation (SPEC D2): success = ``info["is_success"]`` at the last step."""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.collect.collector import EVAL_SEED_OFFSET, to_tensors

GOALS = ("desired_goal", "achieved_goal")  # kept with the steps where the env has them


@dataclass
class EvalResult:
    success_rate: float
    mean_return: float
    mean_length: float
    successes: list[bool] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    episodes: list[dict[str, torch.Tensor]] = field(default_factory=list, repr=False)
    diagnostics: dict[str, float] = field(default_factory=dict)  # the learner's own measures

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        return {f"{prefix}/success_rate": self.success_rate,
                f"{prefix}/mean_return": self.mean_return,
                f"{prefix}/mean_length": self.mean_length,
                **{f"{prefix}/{k}": v for k, v in self.diagnostics.items()}}

    def to_dict(self) -> dict[str, object]:
        return {"success_rate": self.success_rate, "mean_return": self.mean_return,
                "mean_length": self.mean_length, "episodes": len(self.successes),
                **self.diagnostics}


def batch_of_one(obs: dict, info: dict) -> dict[str, torch.Tensor]:
    """A single env's observation (and ``info["action_mask"]``) as a batch of one."""
    out = {k: v.unsqueeze(0) for k, v in to_tensors(obs).items()}
    if "action_mask" in info:
        out["action_mask"] = torch.as_tensor(np.asarray(info["action_mask"], bool))[None]
    return out


def evaluate(algo, env: gym.Env, episodes: int, seed: int, keep_episodes: bool = False,
             shield=None, monitor=None, mode: str = "deterministic") -> EvalResult:
    """Run ``episodes`` episodes with seeds ``seed + EVAL_SEED_OFFSET + k``, deterministic
    unless ``mode="explore"`` (actions sampled as in training).

    Args:
        algo: an ``algos.base.Algorithm`` (``act`` and ``executed``).
        env: a single (non-vector) goal env.
        keep_episodes: return the steps of successful episodes (``obs``, ``desired_goal``,
            ``achieved_goal``, ``action`` in the learner's units), e.g. for prototypes.
        shield: optional ``train.safety`` shield (``restrict`` / ``project``) on every step.
        monitor: optional ``verify.monitor.SafetyMonitor`` that checks every step.

    A learner with ``eval_diagnostics()`` (e.g. ``hgpo_sac``'s subgoal quality) gets every
    step's ``extras`` and achieved goal; its measures join the result's ``diagnostics``.
    """
    diagnostics = algo.eval_diagnostics() if hasattr(algo, "eval_diagnostics") else None
    successes, returns, lengths, kept = [], [], [], []
    for index in range(episodes):
        obs, info = env.reset(seed=seed + EVAL_SEED_OFFSET + index)
        state, done, total, length = None, False, 0.0, 0
        trace: list[dict[str, torch.Tensor]] = []
        while not done:
            obs_t = batch_of_one(obs, info)
            obs_t["is_first"] = torch.tensor([length == 0])
            if shield is not None:
                obs_t = shield.restrict(obs_t)
            action, state, extras = algo.act(obs_t, state, mode)
            if shield is not None:
                action = shield.project(obs_t, action)
                extras = algo.executed(extras, action)
            if keep_episodes:
                stored = extras.get("unit_action", action)[0]
                trace.append({"obs": obs_t["observation"][0], "action": stored,
                              **{k: obs_t[k][0] for k in GOALS if k in obs_t}})
            obs, reward, terminated, truncated, info = env.step(action[0].numpy())
            if monitor is not None:
                monitor.check(np.asarray(obs["observation"])[None], action.numpy(),
                              np.array([length]), inputs=obs_t)
            if diagnostics is not None:
                diagnostics.step(extras, obs_t["achieved_goal"],
                                 torch.as_tensor(obs["achieved_goal"])[None])
            total, length, done = total + float(reward), length + 1, terminated or truncated
        if diagnostics is not None:
            diagnostics.end_episode()
        success = bool(info.get("is_success", False))
        successes.append(success)
        returns.append(total)
        lengths.append(length)
        if keep_episodes and success:
            episode = {k: torch.stack([t[k] for t in trace]) for k in trace[0]}
            episode["return"] = torch.tensor(total)
            kept.append(episode)
    return EvalResult(float(np.mean(successes)), float(np.mean(returns)), float(np.mean(lengths)),
                      successes, lengths, kept,
                      diagnostics.metrics() if diagnostics is not None else {})
