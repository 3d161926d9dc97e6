"""Euclidean projection of a batch of points onto ``{a : G a <= h, low <= a <= high}`` (V3).

Used by ``ContinuousShield``. Three stages, all vectorised over the batch:

1. Rows of ``G`` with a single non-zero entry tighten the box (a clip is then exact).
2. With general rows left, an exact active-set enumeration: in ``m`` dimensions the projection
   has at most ``m`` linearly independent active constraints, so trying every active set of size
   0, 1, ..., m (smallest first) and keeping the first whose equality-constrained projection is
   feasible with non-negative multipliers (KKT) gives the exact answer. Used while the number of
   sets is at most ``MAX_ACTIVE_SETS``.
3. Otherwise Dykstra's alternating projections (converges to the exact projection, slowly when
   the feasible set is thin), stopped when twenty sweeps no longer move the point; also a
   best-effort point (200 sweeps) when no active set is feasible, i.e. the set is empty.

The returned ``ok`` flag says whether every row holds (within 1e-7); when the set is empty the
point is the box-clipped best effort.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

MAX_ACTIVE_SETS = 5000


def project(proposed: np.ndarray, g: np.ndarray, h: np.ndarray, low: np.ndarray,
            high: np.ndarray, iterations: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    """Project ``proposed [N, m]`` onto ``{a : g a <= h, low <= a <= high}``.

    Args:
        g: ``[K, m]`` constraint rows; h: ``[N, K]`` right-hand sides per point.
        low, high: ``[m]`` box (``+-inf`` allowed).
        iterations: most Dykstra sweeps (stage 3 only).

    Returns:
        The projection ``[N, m]`` and ``[N]`` whether every row holds.
    """
    nonzero = np.abs(g) > 0
    general = nonzero.sum(1) > 1
    lo_env, hi_env = _tightened_box(proposed, g, h, nonzero, low, high)
    x = np.clip(proposed, lo_env, hi_env)
    if general.any():
        g_rows, h_rows = g[general], h[:, general]
        solved, small = np.zeros(len(x), bool), _active_set_count(g_rows, lo_env) <= MAX_ACTIVE_SETS
        if small:
            x, solved = _active_sets(proposed, g_rows, h_rows, lo_env, hi_env)
        if not solved.all():  # a large problem, or no feasible point (best effort: fewer sweeps)
            rest = ~solved
            x[rest] = _dykstra(proposed[rest], g_rows, h_rows[rest], lo_env[rest], hi_env[rest],
                               min(iterations, 200) if small else iterations)
    residual = x @ g.T - h if g.size else np.zeros((x.shape[0], 0))
    return x, (residual <= 1e-7).all(axis=1)


def _tightened_box(proposed, g, h, nonzero, low, high) -> tuple[np.ndarray, np.ndarray]:
    """Per-point box ``[N, m]`` from the action box and the single-entry rows.

    Where a row cannot be met inside the action box, the box edge nearest to it is kept.
    """
    lo_env = np.broadcast_to(low, proposed.shape).astype(float)
    hi_env = np.broadcast_to(high, proposed.shape).astype(float)
    s_lo, s_hi = np.full_like(lo_env, -np.inf), np.full_like(hi_env, np.inf)
    for k in np.flatnonzero(nonzero.sum(1) == 1):
        col = int(np.flatnonzero(nonzero[k])[0])
        limit = h[:, k] / g[k, col]
        if g[k, col] > 0:
            s_hi[:, col] = np.minimum(s_hi[:, col], limit)
        else:
            s_lo[:, col] = np.maximum(s_lo[:, col], limit)
    lo_env, hi_env = (np.clip(np.maximum(lo_env, s_lo), lo_env, hi_env),
                      np.clip(np.minimum(hi_env, s_hi), lo_env, hi_env))
    clash = lo_env > hi_env
    lo_env[clash] = hi_env[clash] = (lo_env[clash] + hi_env[clash]) / 2
    return lo_env, hi_env


def _box_rows(lo_env: np.ndarray, hi_env: np.ndarray, m: int):
    """The finite box sides as rows ``[R, m]`` and right-hand sides ``[N, R]``."""
    eye = np.eye(m)
    low_cols = np.flatnonzero(np.isfinite(lo_env).all(0))
    high_cols = np.flatnonzero(np.isfinite(hi_env).all(0))
    rows = np.concatenate([-eye[low_cols], eye[high_cols]])
    rhs = np.concatenate([-lo_env[:, low_cols], hi_env[:, high_cols]], axis=1)
    return rows, rhs


def _active_set_count(g_rows: np.ndarray, lo_env: np.ndarray) -> int:
    """How many active sets ``_active_sets`` may try (general rows plus finite box sides)."""
    m = lo_env.shape[1]
    total = g_rows.shape[0] + 2 * int(np.isfinite(lo_env).all(0).sum())
    return sum(math.comb(total, size) for size in range(min(m, total) + 1))


def _active_sets(proposed: np.ndarray, g_rows: np.ndarray, h_rows: np.ndarray,
                 lo_env: np.ndarray, hi_env: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact projection by KKT over active sets of size 0..m (smallest first)."""
    m = proposed.shape[1]
    box_g, box_h = _box_rows(lo_env, hi_env, m)
    rows, rhs = np.concatenate([g_rows, box_g]), np.concatenate([h_rows, box_h], axis=1)
    best, solved = np.clip(proposed, lo_env, hi_env), np.zeros(len(proposed), bool)
    for size in range(min(m, rows.shape[0]) + 1):
        for subset in itertools.combinations(range(rows.shape[0]), size):
            active = rows[list(subset)]
            gram = active @ active.T
            if size and np.linalg.matrix_rank(gram) < size:
                continue
            excess = proposed @ active.T - rhs[:, list(subset)]            # [N, size]
            multipliers = np.linalg.solve(gram, excess.T).T if size else excess
            point = proposed - multipliers @ active
            ok = ~solved & (multipliers >= -1e-12).all(1) & (point @ rows.T - rhs <= 1e-9).all(1)
            best[ok], solved = point[ok], solved | ok
            if solved.all():
                return best, solved
    return best, solved


def _dykstra(start: np.ndarray, g: np.ndarray, h: np.ndarray, low: np.ndarray,
             high: np.ndarray, iterations: int) -> np.ndarray:
    """Dykstra's projection onto a box ``[N, m]`` and half-spaces ``g [K, m] . a <= h [N, K]``."""
    x = start.copy()
    corrections = [np.zeros_like(x) for _ in range(g.shape[0] + 1)]
    norms = (g**2).sum(1)
    previous = x.copy()
    for sweep in range(iterations):
        y = np.clip(x + corrections[0], low, high)
        corrections[0], x = x + corrections[0] - y, y
        for k in range(g.shape[0]):
            z = x + corrections[k + 1]
            excess = np.maximum(z @ g[k] - h[:, k], 0.0) / norms[k]
            y = z - excess[:, None] * g[k]
            corrections[k + 1], x = z - y, y
        if sweep % 20 == 19:
            if np.abs(x - previous).max() < 1e-13 and (x @ g.T - h <= 1e-10).all():
                break  # converged: twenty more sweeps no longer moved the point
            previous = x.copy()
    return np.clip(x, low, high)
