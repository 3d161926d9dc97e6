"""One-step models ``next_state = f(state, action)`` that an environment declares (V3, V4).

Only affine models are supported: the shield projects actions exactly through them and the
closed-loop verifier pushes linear bounds through them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FETCH_POS_CONTROL_SCALE = 0.05
"""Metres of mocap displacement per unit of FetchReach action (gymnasium-robotics
``fetch/*`` environments multiply ``action[:3]`` by 0.05 before moving the mocap)."""


@dataclass(frozen=True)
class AffineStepModel:
    """``next[indices] = state_matrix @ state + action_matrix @ action + offset``.

    Entries of the state outside ``indices`` are not predicted: ``step`` leaves them unchanged
    and the closed-loop verifier keeps them in their initial box (an assumption it reports).

    Attributes:
        indices: predicted state entries ``[p]``.
        state_matrix: ``[p, n]``.
        action_matrix: ``[p, m]``.
        offset: ``[p]``.
        clip_low, clip_high: ``[p]``, optional: the prediction is clipped into this box (an env
            that keeps its state inside bounds); the shield's linear constraints ignore it.
        error: ``[p]``, optional: how far the env's own arithmetic (e.g. float32) may land from
            the prediction; the closed-loop verifier widens its boxes by it.
    """

    indices: np.ndarray
    state_matrix: np.ndarray
    action_matrix: np.ndarray
    offset: np.ndarray
    clip_low: np.ndarray | None = None
    clip_high: np.ndarray | None = None
    error: np.ndarray | None = None

    def __post_init__(self) -> None:
        p = len(self.indices)
        if self.state_matrix.shape[0] != p or self.action_matrix.shape[0] != p:
            raise ValueError("state_matrix and action_matrix need one row per predicted index")
        if self.offset.shape != (p,):
            raise ValueError(f"offset must be [{p}], got {self.offset.shape}")

    @property
    def state_dim(self) -> int:
        """n, the length of the state vector."""
        return self.state_matrix.shape[1]

    @property
    def action_dim(self) -> int:
        """m, the length of the action vector."""
        return self.action_matrix.shape[1]

    def predict(self, state: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Predicted entries ``[N, p]`` for ``state [N, n]``, ``action [N, m]``."""
        state, action = np.atleast_2d(state), np.atleast_2d(action)
        if state.shape[1] != self.state_dim or action.shape[1] != self.action_dim:
            raise ValueError(
                f"step model expects state [N, {self.state_dim}] and action [N, {self.action_dim}], "
                f"got {state.shape} and {action.shape}"
            )
        affine = state @ self.state_matrix.T + action @ self.action_matrix.T + self.offset
        if self.clip_low is not None:
            affine = np.clip(affine, self.clip_low, self.clip_high)
        return affine

    def step(self, state: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Full next state ``[N, n]``; unpredicted entries are copied from ``state``."""
        nxt = np.array(np.atleast_2d(state), dtype=float)
        nxt[:, self.indices] = self.predict(state, action)
        return nxt


def fetch_reach_step_model(
    state_dim: int = 10, action_dim: int = 4, scale: float = FETCH_POS_CONTROL_SCALE
) -> AffineStepModel:
    """FetchReach position control: ``grip_pos' ~= grip_pos + scale * action[:3]``.

    An approximation: the mocap target moves by exactly ``scale * action[:3]`` but the arm
    follows it through MuJoCo dynamics with a lag, so the real one-step displacement differs.
    Measured on FetchReach-v4 (gymnasium-robotics 1.4.2, 300 random and bang-bang steps): the
    error reached 0.041 / 0.037 / 0.053 m on x / y / z (mean about 0.015 m). With the shield's
    ``margin=0.02`` no floor / box / forbidden-box violation occurred in 2,000 bang-bang steps
    (margin 0.015 still let 8 forbidden-box violations through); see
    ``tests/unit/test_verify_fetch_shield.py``. ``grip_pos`` is ``obs[0:3]``. Use
    ``state_dim=13`` for the actor's input ``[observation (10), desired_goal (3)]``.
    """
    if state_dim < 3 or action_dim < 3:
        raise ValueError("FetchReach needs state_dim >= 3 (grip_pos) and action_dim >= 3")
    indices = np.arange(3)
    state_matrix = np.zeros((3, state_dim))
    state_matrix[indices, indices] = 1.0
    action_matrix = np.zeros((3, action_dim))
    action_matrix[indices, indices] = scale
    return AffineStepModel(indices, state_matrix, action_matrix, np.zeros(3))


def point_reach_step_model(state_dim: int = 4, action_dim: int = 2, step_size: float = 0.1
                           ) -> AffineStepModel:
    """PointReach, exactly: ``position' = clip(position + step_size * action, -1, 1)`` with
    ``position = obs[0:2]``; the env computes it in float32, so predictions carry an error of
    a few float32 roundings of magnitudes up to ``1 + step_size``."""
    if state_dim < 2 or action_dim != 2:
        raise ValueError("PointReach needs state_dim >= 2 (position) and action_dim == 2")
    indices = np.arange(2)
    state_matrix = np.zeros((2, state_dim))
    state_matrix[indices, indices] = 1.0
    rounding = 4 * (np.finfo(np.float32).eps / 2) * (1.0 + step_size)
    return AffineStepModel(indices, state_matrix, step_size * np.eye(2), np.zeros(2),
                           clip_low=-np.ones(2), clip_high=np.ones(2),
                           error=np.full(2, rounding))


def declared_step_model(env_id: str, state_dim: int, action_dim: int,
                        env_kwargs: dict | None = None) -> AffineStepModel | None:
    """The one-step model an environment declares, or None (the shield then only clips).

    Every gymnasium-robotics Fetch task (``Fetch*``) uses the same mocap position control, so
    they share ``fetch_reach_step_model``; PointReach declares its exact dynamics
    (``point_reach_step_model``); other environments declare none.
    """
    from agentic_rl.envs.registration import POINT_ID

    if env_id.startswith("Fetch"):
        return fetch_reach_step_model(state_dim, action_dim)
    if env_id == POINT_ID:
        step_size = float((env_kwargs or {}).get("step_size", 0.1))
        return point_reach_step_model(state_dim, action_dim, step_size)
    return None
