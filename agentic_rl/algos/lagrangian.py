"""What the Lagrangian learners (``sac_lag``, ``ppo_lag``) share: the constraint's keys, the
cost of a step, and the multiplier's projected gradient step."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, Field


class LagrangianConfig(BaseModel):
    """The constraint: mean episode cost (violating steps per episode) under ``cost_limit``."""

    cost_limit: float = Field(0.1, ge=0, description="bound on the mean episode cost "
                              "(violating steps per episode)")
    lagrange_lr: float = Field(0.05, gt=0)
    init_lagrange: float = Field(0.0, ge=0)
    cost_margin: float = Field(0.0, ge=0, description="0: a step costs 1 when it breaks a "
                               "property; > 0: for the cost critic, a reached state also costs "
                               "1 - d / cost_margin within distance d < cost_margin of breaking "
                               "a state property (in the part's units), so it learns of the "
                               "forbidden region from near misses; the multiplier still "
                               "answers to the violations alone")


def lagrange_step(lagrange: float, cost_estimate: float, limit: float, lr: float) -> float:
    """Projected gradient ascent on the multiplier: ``max(0, lambda + lr (J_c - limit))``."""
    return max(0.0, lagrange + lr * (cost_estimate - limit))


def violation_costs(properties: Any, states: np.ndarray, actions: np.ndarray | None = None,
                    margin: float = 0.0) -> np.ndarray:
    """float32 ``[N]``: 1 where the reached state (``states [N, obs_dim]``) or the env action
    breaks a property of ``properties`` (a ``verify.spec.PropertySet``); with ``actions=None``
    only the state properties are judged. With ``margin > 0`` a state within distance
    ``d < margin`` of breaking a state property costs ``1 - d / margin`` (the largest over the
    properties) where it breaks none."""
    from agentic_rl.verify.spec import StateProperty

    if actions is not None:
        masks = list(properties.violations(states, actions).values())
    else:
        masks = [prop.violations(states, properties.parts) for prop in properties.properties
                 if isinstance(prop, StateProperty)]
    costs = (np.any(masks, axis=0) if masks else np.zeros(len(states), bool)).astype(np.float32)
    return with_margin(costs, properties, states, margin) if margin > 0 else costs


def with_margin(costs: np.ndarray, properties: Any, states: np.ndarray,
                margin: float) -> np.ndarray:
    """``costs [N]`` (from ``violation_costs``) raised to ``1 - d / margin`` where the reached
    state (``states [N, obs_dim]``) lies within ``d < margin`` of breaking a state property."""
    from agentic_rl.verify.spec import StateProperty

    out = costs.copy()
    for prop in properties.properties:
        if isinstance(prop, StateProperty):
            near = 1.0 - prop.safe_distance(states, properties.parts) / margin
            np.maximum(out, np.clip(near, 0.0, 1.0).astype(np.float32), out=out)
    return out
