"""What the Lagrangian learners (``sac_lag``, ``ppo_lag``) share: the constraint's keys and the
multiplier's projected gradient step."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LagrangianConfig(BaseModel):
    """The constraint: mean episode cost (violating steps per episode) under ``cost_limit``."""

    cost_limit: float = Field(0.1, ge=0, description="bound on the mean episode cost "
                              "(violating steps per episode)")
    lagrange_lr: float = Field(0.05, gt=0)
    init_lagrange: float = Field(0.0, ge=0)


def lagrange_step(lagrange: float, cost_estimate: float, limit: float, lr: float) -> float:
    """Projected gradient ascent on the multiplier: ``max(0, lambda + lr (J_c - limit))``."""
    return max(0.0, lagrange + lr * (cost_estimate - limit))
