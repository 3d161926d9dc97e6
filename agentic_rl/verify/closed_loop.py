"""Closed-loop proofs: the state stays safe for H steps under the policy and an affine model.

The state is the network's raw input vector ``x [n]`` (for FetchReach ``[observation (10),
desired_goal (3)]``). Each step, CROWN gives linear bounds ``lA x + lb <= a <= uA x + ub`` of the
action over the current state box; the model ``x'[p] = S x + A a + o`` turns them into linear
bounds of the predicted entries in ``x``, concretised over the box (intersected with the plain
interval image). Entries the model does not predict keep their initial box: an *assumption*
(exact for the goal; for velocities the user states their range in the initial box) that the
result reports. Over-approximated boxes are checked against the invariant at steps 0..H; if one
fails, the initial box is split along its widest dimension and both halves are retried, until
``max_boxes`` or ``max_seconds``. Before that, rollouts of the model from sampled initial states
look for a concrete violation (``falsified`` is with respect to the declared model).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from agentic_rl.verify.bounds import crown_linear_bounds
from agentic_rl.verify.rounding import rounding_bound
from agentic_rl.verify.layers import layers_of
from agentic_rl.verify.prove import _net_dtype, _split_widest
from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.spec import ForbiddenBox, StateBox, StateHalfspace
from agentic_rl.verify.step_model import AffineStepModel

Tensor = torch.Tensor
BoxCheck = Callable[[Tensor, Tensor], Tensor]
PointCheck = Callable[[np.ndarray], np.ndarray]


def invariant_checks(invariant, parts: dict[str, tuple[int, int]] | None = None
                     ) -> tuple[BoxCheck, PointCheck]:
    """``(box_safe(lo [B, n], hi [B, n]) -> [B], point_violates(x [N, n]) -> [N])``.

    ``invariant`` is a ``(low [n], high [n])`` pair over the whole state (use +-inf for free
    entries) or a ``StateBox`` / ``StateHalfspace`` / ``ForbiddenBox`` property with its ``parts``.
    """
    if isinstance(invariant, (StateBox, StateHalfspace, ForbiddenBox)):
        if parts is None or invariant.part not in parts:
            raise ValueError(f"property {invariant.name!r} needs `parts` naming {invariant.part!r}")
        start, stop = parts[invariant.part]
        return _property_box_check(invariant, start, stop), lambda x: invariant.violations(x, parts)
    low, high = (torch.as_tensor(v, dtype=torch.float64) for v in invariant)
    low_np, high_np = low.numpy(), high.numpy()
    return (lambda lo, hi: ((lo >= low) & (hi <= high)).all(-1),
            lambda x: ((x < low_np) | (x > high_np)).any(-1))


def _property_box_check(prop, start: int, stop: int) -> BoxCheck:
    if isinstance(prop, StateHalfspace):
        a = torch.as_tensor(prop.a, dtype=torch.float64)
        return lambda lo, hi: (hi[:, start:stop] @ a.clamp_min(0)
                               + lo[:, start:stop] @ a.clamp_max(0) <= prop.b)
    low = torch.as_tensor(prop.low, dtype=torch.float64)
    high = torch.as_tensor(prop.high, dtype=torch.float64)
    if isinstance(prop, StateBox):
        return lambda lo, hi: ((lo[:, start:stop] >= low) & (hi[:, start:stop] <= high)).all(-1)
    return lambda lo, hi: ((hi[:, start:stop] < low) | (lo[:, start:stop] > high)).any(-1)


def step_boxes(net: nn.Module, model: AffineStepModel, lo: Tensor, hi: Tensor
               ) -> tuple[Tensor, Tensor]:
    """Sound box of the next state for every state box ``lo, hi [B, n]`` (the actions as the
    network computes them in floating point: widened by its rounding bound)."""
    bounds = crown_linear_bounds(net, lo, hi)
    error = rounding_bound(net, lo, hi, layer_bounds=bounds.layer_bounds)  # [B, k]
    bounds.lb, bounds.ub = bounds.lb - error, bounds.ub + error
    bounds.lo, bounds.hi = bounds.lo - error, bounds.hi + error
    S = torch.as_tensor(model.state_matrix, dtype=torch.float64)
    A = torch.as_tensor(model.action_matrix, dtype=torch.float64)
    o = torch.as_tensor(model.offset, dtype=torch.float64)
    A_pos, A_neg = A.clamp_min(0), A.clamp_max(0)
    upper_coef = S + A_pos @ bounds.uA + A_neg @ bounds.lA        # [B, p, n]
    lower_coef = S + A_pos @ bounds.lA + A_neg @ bounds.uA
    upper_const = bounds.ub @ A_pos.T + bounds.lb @ A_neg.T + o   # [B, p]
    lower_const = bounds.lb @ A_pos.T + bounds.ub @ A_neg.T + o
    mid, rad = ((lo + hi) / 2)[..., None], ((hi - lo) / 2)[..., None]
    up = (upper_coef @ mid + upper_coef.abs() @ rad)[..., 0] + upper_const
    down = (lower_coef @ mid - lower_coef.abs() @ rad)[..., 0] + lower_const
    s_mid, s_rad = mid[..., 0] @ S.T, rad[..., 0] @ S.abs().T      # plain interval image
    interval_up = s_mid + s_rad + bounds.hi @ A_pos.T + bounds.lo @ A_neg.T + o
    interval_down = s_mid - s_rad + bounds.lo @ A_pos.T + bounds.hi @ A_neg.T + o
    next_lo, next_hi = lo.clone(), hi.clone()
    index = torch.as_tensor(model.indices)
    down, up = torch.maximum(down, interval_down), torch.minimum(up, interval_up)
    if model.error is not None:  # the env's own rounding around the prediction
        error = torch.as_tensor(model.error, dtype=torch.float64)
        down, up = down - error, up + error
    if model.clip_low is not None:  # clipping is monotone: the box's image is its bounds'
        clip_low = torch.as_tensor(model.clip_low, dtype=torch.float64)
        clip_high = torch.as_tensor(model.clip_high, dtype=torch.float64)
        down = torch.minimum(torch.maximum(down, clip_low), clip_high)
        up = torch.minimum(torch.maximum(up, clip_low), clip_high)
    next_lo[:, index], next_hi[:, index] = down, up
    return next_lo, next_hi


def _rollouts(net: nn.Module, model: AffineStepModel, starts: np.ndarray, horizon: int,
              point_violates: PointCheck) -> tuple[int, int, np.ndarray] | None:
    """Simulate the model from ``starts [N, n]``; the first (start index, step, trajectory)
    that breaks the invariant, or None."""
    states, history = starts, [starts]
    dtype = _net_dtype(net)
    for step in range(horizon + 1):
        bad = point_violates(states)
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            return index, step, np.stack([h[index] for h in history])
        if step == horizon:
            return None
        with torch.no_grad():
            actions = net(torch.as_tensor(states, dtype=dtype)).double().numpy()
        states = model.step(states, actions)
        history.append(states)
    return None


def _check_inputs(net: nn.Module, model: AffineStepModel, low: torch.Tensor,
                  high: torch.Tensor) -> None:
    """A clear error where the initial box or the policy's input does not fit the model."""
    if low.shape != (model.state_dim,) or high.shape != low.shape:
        raise ValueError(f"initial box must be [{model.state_dim}] (the model's state), "
                         f"got {tuple(low.shape)} and {tuple(high.shape)}")
    first = next((layer for layer in layers_of(net) if isinstance(layer, nn.Linear)), None)
    if first is not None and first.in_features != model.state_dim:
        raise ValueError(f"the policy takes {first.in_features} inputs but the step model's state "
                         f"has {model.state_dim}; build the model over the policy input (e.g. "
                         f"fetch_reach_step_model(state_dim={first.in_features}))")


def _falsify(net: nn.Module, model: AffineStepModel, low: torch.Tensor, high: torch.Tensor,
             horizon: int, point_violates: PointCheck, samples: int,
             generator: torch.Generator | None) -> tuple[list, list, dict] | None:
    """Model rollouts from the box's centre and ``samples`` uniform starts; for a start that
    breaks the invariant (and breaks it again when replayed alone, as a user would):
    ``(start [n], the policy's action there [m], details)``; None where none does."""
    noise = torch.rand((samples, low.numel()), generator=generator, dtype=torch.float64)
    starts = torch.cat([((low + high) / 2)[None], low + (high - low) * noise]).numpy()
    found = _rollouts(net, model, starts, horizon, point_violates)
    if found is None:
        return None
    replay = _rollouts(net, model, starts[found[0]:found[0] + 1], horizon, point_violates)
    if replay is None:
        return None
    index, (_, step, trajectory) = found[0], replay
    with torch.no_grad():
        action = net(torch.as_tensor(starts[index:index + 1], dtype=_net_dtype(net)))[0]
    return starts[index].tolist(), action.tolist(), {
        "method": "model_rollout", "violation_step": step, "trajectory": trajectory.tolist()}


def verify_closed_loop(
    net: nn.Module, model: AffineStepModel, initial_low, initial_high, invariant,
    horizon: int, parts: dict[str, tuple[int, int]] | None = None, name: str = "closed_loop",
    samples: int = 256, max_boxes: int = 256, max_seconds: float = 5.0,
    generator: torch.Generator | None = None,
) -> VerifyResult:
    """Prove that every state reached in ``horizon`` steps from the initial box is safe.

    Args:
        net: policy over the raw state ``[n] -> [m]`` (normaliser layers included).
        model: affine one-step model with ``state_dim == n`` and ``action_dim == m``.
        initial_low, initial_high: the initial state box ``[n]``.
        invariant: ``(low [n], high [n])`` or a state property (then give ``parts``).
        horizon: number of steps H; states 0..H are checked.
        samples: model rollouts from sampled starts tried first to falsify.
    """
    start_time = time.perf_counter()
    box_safe, point_violates = invariant_checks(invariant, parts)
    low = torch.as_tensor(initial_low, dtype=torch.float64)
    high = torch.as_tensor(initial_high, dtype=torch.float64)
    _check_inputs(net, model, low, high)
    assumption = {"unpredicted_entries_fixed_to_initial_box":
                  sorted(set(range(model.state_dim)) - set(int(i) for i in model.indices))}
    falsified = _falsify(net, model, low, high, horizon, point_violates, samples, generator)
    if falsified is not None:
        start, action, details = falsified
        return VerifyResult(name, "falsified", time.perf_counter() - start_time, start, action,
                            {**details, **assumption})
    queue_lo, queue_hi, width0, explored, per_box = low[None], high[None], high - low, 0, 0.0
    while queue_lo.shape[0]:
        elapsed = time.perf_counter() - start_time
        # no round is started that the last one's time per box says would end past the budget
        if explored >= max_boxes or elapsed + per_box * queue_lo.shape[0] > max_seconds:
            return VerifyResult(name, "unknown", time.perf_counter() - start_time, details={
                "method": "closed_loop_crown", "boxes": explored, "horizon": horizon, **assumption})
        lo, hi = queue_lo, queue_hi
        explored += lo.shape[0]
        round_start = time.perf_counter()
        safe = box_safe(lo, hi)
        for _ in range(horizon):
            lo, hi = step_boxes(net, model, lo, hi)
            safe &= box_safe(lo, hi)
        per_box = (time.perf_counter() - round_start) / lo.shape[0]
        failed_lo, failed_hi = queue_lo[~safe], queue_hi[~safe]
        queue_lo, queue_hi = _split_widest(failed_lo, failed_hi, width0) if (~safe).any() else (
            failed_lo, failed_hi)
    return VerifyResult(name, "proved", time.perf_counter() - start_time, details={
        "method": "closed_loop_crown", "boxes": explored, "horizon": horizon, **assumption})
