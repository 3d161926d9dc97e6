"""Counterexample search by projected gradient ascent (capability V4).

An output property is a set of linear constraints ``spec_matrix @ y <= spec_bias`` on the network
output ``y``; its *violation margin* at ``x`` is ``max_j (spec_matrix @ net(x) - spec_bias)_j``,
positive exactly when the property is broken. The search climbs that margin with signed-gradient
steps from many random points of the box (batched), clipping back into the box after each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

Tensor = torch.Tensor


@dataclass
class SearchResult:
    """Best point found: ``point [d]``, ``output [k]``, its margin, and whether it violates."""

    point: Tensor
    output: Tensor
    margin: float
    violates: bool


def bounds_spec(low: Tensor | None, high: Tensor | None) -> tuple[Tensor, Tensor]:
    """``low <= y <= high`` as ``(spec_matrix [r, k], spec_bias [r])``; infinite sides dropped."""
    if low is None and high is None:
        raise ValueError("give action_low and/or action_high")
    ref = high if low is None else low
    k = torch.as_tensor(ref).numel()
    low = torch.full((k,), -torch.inf) if low is None else torch.as_tensor(low, dtype=torch.float64)
    high = torch.full((k,), torch.inf) if high is None else torch.as_tensor(high, dtype=torch.float64)
    low, high = low.detach().reshape(-1), high.detach().reshape(-1)
    if low.shape != (k,) or high.shape != (k,):
        raise ValueError(f"action_low and action_high must both have {k} entries")
    eye = torch.eye(k, dtype=torch.float64)
    matrix = torch.cat([eye[torch.isfinite(high)], -eye[torch.isfinite(low)]])
    bias = torch.cat([high[torch.isfinite(high)], -low[torch.isfinite(low)]])
    if matrix.shape[0] == 0:
        raise ValueError("every action bound is infinite: nothing to verify")
    return matrix, bias


def violation_margin(output: Tensor, spec_matrix: Tensor, spec_bias: Tensor) -> Tensor:
    """``max_j (spec_matrix @ y - spec_bias)_j`` for ``output [N, k]`` -> ``[N]``, in float64
    (a float32 output is compared exactly with the float64 property, never rounded to it)."""
    matrix = torch.as_tensor(spec_matrix, dtype=torch.float64)
    bias = torch.as_tensor(spec_bias, dtype=torch.float64)
    return (output.to(torch.float64) @ matrix.T - bias).amax(-1)


def search_counterexample(
    net: nn.Module, low: Tensor, high: Tensor, spec_matrix: Tensor, spec_bias: Tensor,
    starts: int = 64, steps: int = 30, generator: torch.Generator | None = None,
) -> SearchResult:
    """Maximise the violation margin over the box ``[low, high]`` (each ``[d]``).

    Runs ``steps`` signed-gradient steps from ``starts`` points (the box centre plus uniform
    samples drawn with ``generator``); the step shrinks linearly from 25% to 1% of the box width.
    Deterministic given the generator. The network is evaluated in its own dtype, so a returned
    violation is one of the network as deployed.
    """
    param = next(net.parameters(), None)
    dtype = param.dtype if param is not None else torch.float32
    region = (torch.as_tensor(low, dtype=torch.float64), torch.as_tensor(high, dtype=torch.float64))
    low, high = region[0].to(dtype), region[1].to(dtype)
    if low.shape != high.shape or low.dim() != 1:
        raise ValueError(f"low and high must both be [d], got {tuple(low.shape)}, {tuple(high.shape)}")
    width = high - low
    noise = torch.rand((max(starts - 1, 0), low.numel()), generator=generator, dtype=dtype)
    points = torch.cat([((low + high) / 2)[None], low + width * noise])
    best_point, best_margin = points[0], -torch.inf
    for step in range(steps + 1):
        points = points.detach().requires_grad_(True)
        with torch.enable_grad():
            output = net(points)
            margin = violation_margin(output, spec_matrix, spec_bias)
            (grad,) = torch.autograd.grad(margin.sum(), points)
        margin = margin.detach()
        top = int(margin.argmax())
        if float(margin[top]) > best_margin:
            best_margin = float(margin[top])
            best_point = points[top].detach().clone()
        if step == steps:
            break
        size = width * (0.25 - 0.24 * step / max(steps - 1, 1))
        points = torch.minimum(torch.maximum(points + size * grad.sign(), low), high)
    return confirm(net, best_point, spec_matrix, spec_bias, region)


def confirm(net: nn.Module, point: Tensor, spec_matrix: Tensor, spec_bias: Tensor,
            region: tuple[Tensor, Tensor] | None = None) -> SearchResult:
    """Evaluate one ``point [d]`` on its own (as a user replaying it would) and measure its margin.

    With ``region`` (float64 ``low, high``) the point is first moved into it exactly, in
    float64, and the network gets it rounded to its own precision (as the agent gets a float32
    observation); the float64 point is what is reported. A batched evaluation can differ in the
    last bits from a single one; only a violation that reproduces on the single evaluation
    counts.
    """
    point = point.detach()
    if region is not None:
        point = torch.minimum(torch.maximum(point.to(torch.float64), region[0]), region[1])
    param = next(net.parameters(), None)
    dtype = param.dtype if param is not None else torch.float32
    with torch.no_grad():
        output = net(point.to(dtype)[None])[0]
    margin = float(violation_margin(output[None], spec_matrix, spec_bias)[0])
    return SearchResult(point.clone(), output, margin, margin > 0.0)
