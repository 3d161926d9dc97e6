"""Pure loss functions for SAC and OPD.

Each takes tensors and returns tensors; no networks, no optimisers, so every one can be checked
against a hand computation on small inputs (tests/unit/test_losses.py).
"""

from __future__ import annotations

import math

import torch


def soft_q_target(
    reward: torch.Tensor,
    terminated: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    alpha: torch.Tensor | float,
    gamma: float,
) -> torch.Tensor:
    """Soft Bellman target ``r + gamma (1 - terminated) (min_i Q_i(s', a') - alpha log pi(a'|s'))``.

    Args:
        reward: ``[B]``.
        terminated: ``[B]``, 1.0 only for true terminal states (never for time limits).
        next_q: ``[num_q, B]`` target-critic values at ``(s', a')``.
        next_log_prob: ``[B]`` log-probability of ``a' ~ pi(s')``.
        alpha: entropy temperature.
        gamma: discount.

    Returns:
        ``[B]`` targets (no gradient flows through them if the inputs carry none).
    """
    soft_value = next_q.min(dim=0).values - alpha * next_log_prob
    return reward + gamma * (1.0 - terminated) * soft_value


def critic_loss(q: torch.Tensor, target: torch.Tensor,
                weight: torch.Tensor | None = None) -> torch.Tensor:
    """``0.5 * sum_i mean_b w_b (Q_i - target)^2`` for ``q [num_q, B]``, ``target [B]`` and
    importance-sampling weights ``weight [B]`` (prioritised replay; none: all 1)."""
    squared = (q - target.unsqueeze(0)).pow(2)
    if weight is not None:
        squared = squared * weight.unsqueeze(0)
    return 0.5 * squared.mean(dim=1).sum()


def td_error(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``[B]`` the largest ``|Q_i - target|`` over the ensemble (a prioritised replay's
    priority, as in Fujimoto et al.'s LAP for twin critics)."""
    return (q - target.unsqueeze(0)).abs().amax(dim=0)


def sac_actor_loss(q_pi: torch.Tensor, log_prob: torch.Tensor, alpha: torch.Tensor | float):
    """``mean_b (alpha log pi(a|s) - min_i Q_i(s, a))`` for ``q_pi [num_q, B]``, ``log_prob [B]``."""
    return (alpha * log_prob - q_pi.min(dim=0).values).mean()


def temperature_loss(
    log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """Automatic entropy tuning: ``-mean_b log_alpha (log pi + target_entropy)`` (no grad to pi)."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``values [B]`` over entries with ``mask [B] == 1``; 0 when the mask is empty."""
    if mask is None:
        return values.mean()
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def distill_mse_loss(
    policy_action: torch.Tensor, prototype_action: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean squared error between the policy's deterministic action and the prototype's.

    Args:
        policy_action: ``[B, act_dim]`` in [-1, 1].
        prototype_action: ``[B, act_dim]`` in [-1, 1].
        mask: optional ``[B]`` Q-filter weights.

    Returns:
        Scalar: mean over action dims, then (masked) mean over the batch.
    """
    return masked_mean((policy_action - prototype_action).pow(2).mean(dim=-1), mask)


def distill_nll_loss(prototype_log_prob: torch.Tensor, mask: torch.Tensor | None = None):
    """Negative log-likelihood of the prototype actions under the policy, ``[B] -> scalar``."""
    return -masked_mean(prototype_log_prob, mask)


def q_filter_mask(q_prototype: torch.Tensor, q_policy: torch.Tensor) -> torch.Tensor:
    """1.0 where the critic prefers the prototype action: ``min_i Q_i(s, a_proto) > min_i Q_i(s, pi(s))``.

    Args:
        q_prototype: ``[num_q, B]``.
        q_policy: ``[num_q, B]``.

    Returns:
        ``[B]`` float mask without gradient.
    """
    better = q_prototype.min(dim=0).values > q_policy.min(dim=0).values
    return better.float().detach()


def scheduled_value(start: float, end: float, steps: int, kind: str, step: int) -> float:
    """Value of a schedule from ``start`` to ``end`` over ``steps`` steps, then held at ``end``.

    ``kind="linear"`` interpolates linearly; ``kind="exponential"`` interpolates in log space
    (``start * (end / start) ** fraction``), i.e. a constant decay rate per step.
    """
    fraction = min(max(step, 0) / max(steps, 1), 1.0)
    if kind == "linear":
        return start + fraction * (end - start)
    if kind == "exponential":
        return start * math.exp(fraction * math.log(end / start))
    raise ValueError(f"unknown schedule {kind!r}; use 'linear' or 'exponential'")
