"""Pure losses and advantages for text agents over admissible commands (numpy/torch in, out).

* :func:`command_cross_entropy`: discrete OPD distillation toward prototype commands.
* :func:`group_advantages`: value minus the mean of its group (GRPO-style), optionally / std.
* :func:`hierarchy_of_groups_advantages`: Hierarchy-of-Groups Policy Optimization (He et al.
  2026, arXiv 2602.22817): each step belongs to nested groups of steps of the same game whose
  last ``k + 1`` observations match (k = 0 is anchor-state grouping); its advantage is the
  weighted mean of its in-group advantages with weights ``(k + 1) ** alpha``.

Checked against hand computations in ``tests/unit/test_text_losses.py``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from agentic_rl.data.text_episodes import TextEpisode, discounted_returns


def command_cross_entropy(logits: torch.Tensor, target: torch.Tensor,
                          mask: torch.Tensor) -> torch.Tensor:
    """Mean over masked steps of ``-log softmax(logits)[target]``.

    Args:
        logits: ``[M, N]`` (-inf on inadmissible commands).
        target: ``[M]`` int64 prototype command indices.
        mask: ``[M]`` bool, steps that count.

    Returns:
        Scalar (0 when the mask is empty).
    """
    log_prob = torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    weight = mask.float()
    log_prob = log_prob.masked_fill(~mask, 0.0)  # a masked-out -inf must not turn into nan
    return -(log_prob * weight).sum() / weight.sum().clamp(min=1.0)


def group_advantages(values: np.ndarray, groups: np.ndarray, normalize_std: bool = False,
                     eps: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """``value - mean(values of its group)``, divided by the group's std if asked.

    Args:
        values: ``[S]`` returns.
        groups: ``[S]`` group labels (any integers).
        normalize_std: divide by the group's (population) std + eps.

    Returns:
        ``(advantages [S], group sizes [S])``; a group of one has advantage 0.
    """
    values = np.asarray(values, np.float64)
    _, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, values) / sizes
    advantages = values - means[inverse]
    if normalize_std:
        variance = np.bincount(inverse, advantages ** 2) / sizes
        advantages = advantages / (np.sqrt(variance)[inverse] + eps)
    return advantages.astype(np.float32), sizes[inverse]


def hierarchy_of_groups_advantages(returns: np.ndarray, level_groups: Sequence[np.ndarray],
                                   alpha: float = 1.0, normalize_std: bool = False,
                                   eps: float = 1e-6) -> np.ndarray:
    """Weighted mean over nested groups of per-group advantages.

    Args:
        returns: ``[S]`` discounted returns of every step.
        level_groups: ``K + 1`` arrays ``[S]``; ``level_groups[k][s]`` labels the group of
            steps whose last ``k + 1`` observations (same game) equal step ``s``'s.
        alpha: level weight exponent, ``w_k = (k + 1) ** alpha``.
        normalize_std: divide each in-group advantage by its group's std.

    Returns:
        ``[S]`` float32; levels where the step's group holds only itself get no weight, and a
        step alone at every level gets 0.
    """
    total = np.zeros(len(returns), np.float64)
    weight = np.zeros(len(returns), np.float64)
    for k, groups in enumerate(level_groups):
        advantage, size = group_advantages(returns, groups, normalize_std, eps)
        w = (k + 1.0) ** alpha * (size > 1)
        total += w * advantage
        weight += w
    return np.where(weight > 0, total / np.maximum(weight, 1e-12), 0.0).astype(np.float32)


def context_groups(games: Sequence[str], observations: Sequence[np.ndarray],
                   levels: int) -> list[np.ndarray]:
    """Group labels of every step for ``k = 0..levels``: same game, same last ``k + 1``
    observations (steps near the episode start pad their history with a start marker).

    Args:
        games: E game names (episodes of one game are compared with each other).
        observations: E arrays ``[L_e]`` of hashable observation ids.
        levels: K.

    Returns:
        ``K + 1`` int64 arrays over the ``sum_e L_e`` steps in episode order.
    """
    out = []
    for k in range(levels + 1):
        labels: dict[tuple, int] = {}
        column = []
        for game, obs in zip(games, observations):
            padded = [None] * k + [int(o) for o in obs]
            for t in range(len(obs)):
                key = (game, *padded[t : t + k + 1])
                column.append(labels.setdefault(key, len(labels)))
        out.append(np.asarray(column, np.int64))
    return out


def gae_episode(episode: TextEpisode, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE over one episode: ``(advantages [L], returns [L])``; the value after the last step
    is 0 if it terminated and ``bootstrap_value`` if it was truncated."""
    values = np.append(episode.value, 0.0 if episode.terminated else episode.bootstrap_value)
    advantages = np.zeros(len(episode), np.float32)
    running = 0.0
    for t in range(len(episode) - 1, -1, -1):
        delta = episode.reward[t] + gamma * values[t + 1] - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, advantages + episode.value


def success_shaping(potential: np.ndarray, ends_period: np.ndarray,
                    period_succeeds: np.ndarray) -> np.ndarray:
    """Intrinsic reward from a subgoal-success predictor: the change in the predicted chance of
    finishing the current subgoal, ``r[t] = V[t+1] - P[t]`` with ``V[t+1] = P[t+1]`` inside a
    Manager period and the outcome (1 done, 0 not) at its last step, so a period's rewards sum
    to its outcome minus the chance predicted at its start (potential-based shaping).

    Args:
        potential: ``[L]`` predicted chance at each step.
        ends_period, period_succeeds: ``[L]`` bool (``plan.text_subgoals.period_outcomes``).

    Returns:
        float32 ``[L]``.
    """
    potential = np.asarray(potential, np.float64)
    following = np.append(potential[1:], 0.0)
    value = np.where(ends_period, np.asarray(period_succeeds, np.float64), following)
    return (value - potential).astype(np.float32)


def step_advantages(episodes: Sequence[TextEpisode], config: Any
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per-step ``(advantages, returns)`` ``[S]``, the episodes' steps in order, by the
    ``TextOPDConfig`` fields ``rl`` (``ppo``: GAE per episode) and ``advantage`` (``episode``:
    the episode's return against its game group; ``hog``: hierarchy-of-groups over matching
    observation histories)."""
    c = config
    if c.rl == "ppo":
        pairs = [gae_episode(e, c.gamma, c.gae_lambda) for e in episodes]
        return np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])
    returns = np.concatenate([discounted_returns(e.reward, c.gamma) for e in episodes])
    games = [e.game for e in episodes]
    if c.advantage == "episode":
        totals = np.asarray([float(e.reward.sum()) for e in episodes])
        episode_adv, _ = group_advantages(totals, np.unique(games, return_inverse=True)[1],
                                          c.normalize_std)
        return np.repeat(episode_adv, [len(e) for e in episodes]), returns
    observations = [e.observation * 1_000_003 + e.inventory for e in episodes]
    groups = context_groups(games, observations, c.hog_levels)
    return hierarchy_of_groups_advantages(returns, groups, c.hog_alpha, c.normalize_std), returns
