"""Prove or falsify output properties of a policy network over a box of inputs (V4).

``verify_action_property`` first spends a short counterexample search (projected gradient
ascent); if that finds nothing it runs CROWN with branch-and-bound: boxes whose CROWN upper bound
of ``spec_matrix @ y - spec_bias`` is below ``-margin`` on every row are proved; the others are
checked at their centre (a violation there is a real counterexample) and split in two along the
input dimension where the worst row's CROWN upper bound varies most (|coefficient| x width).
The answer is ``proved`` only when every box is proved, ``falsified`` only with an input whose
actual network output violates, and ``unknown`` when the box or time budget runs out (its
details then give ``violation_upper_bound``, a sound upper bound of
``max_j (spec_matrix @ y - spec_bias)_j`` over the whole box).

A proof holds for the network as it runs in floating point (float32 for the agent's actor),
not only for its real-number idealisation: each box's bound is raised by a rigorous bound of
the rounding (``rounding.py``), and ``margin`` (default 1e-9) covers the float64 arithmetic of
the bounds themselves. Action bounds of a tanh-squashed policy are proved on the values before
the tanh (``tanh_head.py``), so saturated actions do not need a margin past 1.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from agentic_rl.verify.bounds import crown_linear_bounds
from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.rounding import received, rounding_bound
from agentic_rl.verify.tanh_head import pre_tanh_problem
from agentic_rl.verify.search import (
    SearchResult,
    bounds_spec,
    confirm,
    search_counterexample,
    violation_margin,
)

Tensor = torch.Tensor


def _net_dtype(net: nn.Module) -> torch.dtype:
    param = next(net.parameters(), None)
    return param.dtype if param is not None else torch.float32


def splittable(lo: Tensor, hi: Tensor) -> Tensor:
    """``[B, d]``: the side has a midpoint strictly inside it in the box's precision (a point
    region, or a side as thin as the rounding, cannot be split any further)."""
    mid = (lo + hi) / 2
    return (mid > lo) & (mid < hi)


def _split_widest(lo: Tensor, hi: Tensor, width0: Tensor,
                  score: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Halve each box ``[B, d]`` -> ``[2B, d]`` boxes.

    The split dimension maximises ``score [B, d]`` if given, else the width relative to the
    original box ``width0 [d]``.
    """
    if score is None:
        score = (hi - lo) / torch.where(width0 > 0, width0, torch.ones_like(width0))
    score = torch.where(splittable(lo, hi), score, -torch.inf)  # never a zero-width side
    dim = score.argmax(-1, keepdim=True)
    mid = ((lo + hi) / 2).gather(-1, dim)
    left_hi, right_lo = hi.clone(), lo.clone()
    left_hi.scatter_(-1, dim, mid)
    right_lo.scatter_(-1, dim, mid)
    return torch.cat([lo, right_lo]), torch.cat([left_hi, hi])


def branch_and_bound(
    net: nn.Module, low: Tensor, high: Tensor, spec_matrix: Tensor, spec_bias: Tensor,
    max_boxes: int = 20_000, max_seconds: float = 1.0, batch_size: int = 64,
    margin: float = 1e-9, name: str = "property",
) -> VerifyResult:
    """Prove ``spec_matrix @ net(x) <= spec_bias`` for all x in ``[low, high]`` (each ``[d]``).

    Args:
        spec_matrix: ``[r, k]``; spec_bias: ``[r]``.
        max_boxes: budget of boxes bounded; max_seconds: budget of wall-clock time (no batch is
            started that 1.5 times the previous batch's duration says would end past it).
        batch_size: boxes bounded per CROWN call.
        margin: a box is proved when every upper bound, rounding included, is ``<= -margin``.
    """
    start = time.perf_counter()
    low, high, spec_matrix, spec_bias = (torch.as_tensor(t, dtype=torch.float64).detach()
                                         for t in (low, high, spec_matrix, spec_bias))
    region = (low, high)  # counterexamples lie in it; bounds cover what the network receives
    low, high = received(low, high, _net_dtype(net))
    queue_lo, queue_hi, queue_bound = low[None], high[None], torch.full((1,), torch.inf)
    width0, explored, last_batch, root_bound = high - low, 0, 0.0, None
    while queue_lo.shape[0]:
        batch_start = time.perf_counter()
        if explored >= max_boxes or batch_start - start + 1.5 * last_batch > max_seconds:
            return VerifyResult(name, "unknown", time.perf_counter() - start, details={
                "method": "crown+bab", "boxes": explored, "open_boxes": int(queue_lo.shape[0]),
                "violation_upper_bound": float(queue_bound.max()),
                "root_violation_upper_bound": root_bound})
        lo, hi = queue_lo[:batch_size], queue_hi[:batch_size]
        queue_lo, queue_hi = queue_lo[batch_size:], queue_hi[batch_size:]
        queue_bound = queue_bound[batch_size:]
        upper, score = _bound_boxes(net, lo, hi, spec_matrix, spec_bias)
        explored += lo.shape[0]
        root_bound = float(upper[0]) if root_bound is None else root_bound
        keep = upper > -margin
        if not keep.any():
            continue
        lo, hi, upper = lo[keep], hi[keep], upper[keep]
        found = _falsify_at_centres(net, lo, hi, spec_matrix, spec_bias, region)
        if found is not None:
            return VerifyResult(name, "falsified", time.perf_counter() - start,
                                found.point.tolist(), found.output.tolist(),
                                {"method": "crown+bab", "boxes": explored,
                                 "violation": found.margin})
        stuck = ~splittable(lo, hi).any(-1)
        if stuck.any():  # a box too thin to split is within the margin of the bound: no proof
            return VerifyResult(name, "unknown", time.perf_counter() - start, details={
                "method": "crown+bab", "boxes": explored, "reason": "a box too thin to split "
                "(e.g. a point region) lies within the rounding margin of the bound",
                "violation_upper_bound": float(upper[stuck].max()),
                "root_violation_upper_bound": root_bound})
        children_lo, children_hi = _split_widest(lo, hi, width0, score[keep])
        last_batch = time.perf_counter() - batch_start  # stop before a batch would overrun
        queue_lo, queue_hi = torch.cat([queue_lo, children_lo]), torch.cat([queue_hi, children_hi])
        queue_bound = torch.cat([queue_bound, upper, upper])  # a child inherits its parent's bound
    return VerifyResult(name, "proved", time.perf_counter() - start, details={
        "method": "crown+bab", "boxes": explored, "root_violation_upper_bound": root_bound})


def _bound_boxes(net: nn.Module, lo: Tensor, hi: Tensor, spec_matrix: Tensor,
                 spec_bias: Tensor) -> tuple[Tensor, Tensor]:
    """Upper bound of the violation margin per box ``[B]`` (the network's rounding included)
    and a split score ``[B, d]``.

    The score is ``|coefficient| * width`` of the worst row's CROWN bound.
    """
    bounds = crown_linear_bounds(net, lo, hi, spec_matrix)
    rounding = rounding_bound(net, lo, hi, layer_bounds=bounds.layer_bounds) @ spec_matrix.abs().T
    rows_upper = bounds.hi + rounding - spec_bias
    upper, worst_row = rows_upper.max(-1)
    coef = bounds.uA[torch.arange(lo.shape[0]), worst_row]
    return upper, coef.abs() * (hi - lo)


def _falsify_at_centres(net: nn.Module, lo: Tensor, hi: Tensor, spec_matrix: Tensor,
                        spec_bias: Tensor, region: tuple[Tensor, Tensor]
                        ) -> SearchResult | None:
    """The first box centre ``[d]``, moved into ``region``, whose (replayed) output violates
    the property, if any."""
    centres = torch.minimum(torch.maximum((lo + hi) / 2, region[0]), region[1])
    with torch.no_grad():
        violation = violation_margin(net(centres.to(_net_dtype(net))), spec_matrix, spec_bias)
    for index in torch.nonzero(violation > 0)[:, 0].tolist():
        found = confirm(net, centres[index], spec_matrix, spec_bias, region)
        if found.violates:
            return found
    return None


def verify_action_property(
    net: nn.Module, low: Tensor, high: Tensor, action_low: Tensor | None = None,
    action_high: Tensor | None = None, spec_matrix: Tensor | None = None,
    spec_bias: Tensor | None = None, name: str = "action_property",
    search_starts: int = 64, search_steps: int = 20, max_boxes: int = 20_000,
    max_seconds: float = 1.0, generator: torch.Generator | None = None,
) -> VerifyResult:
    """Prove or falsify a property of the network output over the input box ``[low, high]``.

    The property is either action bounds ``action_low <= y <= action_high`` (``[k]`` each, one
    side may be None) or the output half-spaces ``spec_matrix [r, k] @ y <= spec_bias [r]``.
    Counterexample search runs first (restarted within ``SEARCH_SHARE`` of the time budget),
    then CROWN branch-and-bound within the budgets.
    """
    start = time.perf_counter()
    if spec_matrix is None:
        spec_matrix, spec_bias = bounds_spec(action_low, action_high)
    elif spec_bias is None or action_low is not None or action_high is not None:
        raise ValueError("give either action_low/action_high or spec_matrix with spec_bias")
    spec_matrix = torch.as_tensor(spec_matrix, dtype=torch.float64).detach()
    spec_bias = torch.as_tensor(spec_bias, dtype=torch.float64).detach()
    found = _search(net, low, high, spec_matrix, spec_bias, search_starts, search_steps,
                    generator, start + SEARCH_SHARE * max_seconds)
    if found.violates:
        return VerifyResult(name, "falsified", time.perf_counter() - start,
                            found.point.tolist(), found.output.tolist(),
                            {"method": "gradient_search", "violation": found.margin})
    result = _pre_tanh_proof(net, low, high, spec_matrix, spec_bias, max_boxes,
                             max_seconds - (time.perf_counter() - start), name)
    if result is None:
        budget = max(max_seconds - (time.perf_counter() - start), 0.0)
        result = branch_and_bound(net, low, high, spec_matrix, spec_bias, max_boxes=max_boxes,
                                  max_seconds=budget, name=name)
    result.seconds = time.perf_counter() - start
    result.details["search_best_margin"] = found.margin
    return result


SEARCH_SHARE = 0.25  # of the budget, for restarts of the counterexample search


def _search(net: nn.Module, low, high, spec_matrix: Tensor, spec_bias: Tensor, starts: int,
            steps: int, generator: torch.Generator | None, deadline: float) -> SearchResult:
    """The counterexample search, restarted from new random points until it finds a violation
    or the next round would pass ``deadline`` (a thin violating corner is found by some
    rounds and missed by others); the best round's result."""
    best = None
    while True:
        round_start = time.perf_counter()
        found = search_counterexample(net, torch.as_tensor(low), torch.as_tensor(high),
                                      spec_matrix, spec_bias, starts, steps, generator)
        if best is None or found.margin > best.margin:
            best = found
        now = time.perf_counter()
        if best.violates or now + (now - round_start) > deadline:
            return best


def _pre_tanh_proof(net: nn.Module, low, high, spec_matrix: Tensor, spec_bias: Tensor,
                    max_boxes: int, seconds: float, name: str) -> VerifyResult | None:
    """Branch and bound on the values before the policy's tanh (``tanh_head``); a proof or a
    counterexample of the whole network, else None (the caller bounds the whole network)."""
    problem = pre_tanh_problem(net, spec_matrix, spec_bias)
    if problem is None:
        return None
    if problem.spec_matrix.shape[0] == 0:
        return VerifyResult(name, "proved", 0.0, details={
            "method": "tanh range", "reason": "every bound lies outside the squashed range"})
    result = branch_and_bound(problem.net, low, high, problem.spec_matrix, problem.spec_bias,
                              max_boxes=max_boxes, max_seconds=max(seconds / 2, 0.0), name=name)
    result.details["method"] = "crown+bab before tanh"
    if result.status == "proved":
        return result
    if result.status == "falsified":  # a pre-tanh violation: does the whole network violate?
        found = confirm(net, torch.tensor(result.counterexample, dtype=torch.float64),
                        spec_matrix, spec_bias, (torch.as_tensor(low, dtype=torch.float64),
                                                 torch.as_tensor(high, dtype=torch.float64)))
        if found.violates:
            result.output_at_counterexample = found.output.tolist()
            result.details["violation"] = found.margin
            return result
    return None
