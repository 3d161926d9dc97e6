"""Action bounds of a tanh-squashed policy, proved on the value before the tanh.

A bound such as ``a_k <= 0.99`` on ``a = shift + scale * tanh(z)`` holds exactly where
``z_k <= atanh((0.99 - shift) / scale)``: tanh is monotone, so nothing is lost, while a linear
relaxation of a saturated tanh is loose (a bound at 1.0 is never provable past z of about 7 when
the relaxation must leave a margin). The thresholds leave room for the floating-point tanh
(``TANH_ULPS``) and the final multiply-add; a bound the squashed action can never cross
(``a_k <= high`` where ``tanh <= 1`` maps to at most ``high``) needs no proof at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from agentic_rl.verify.layers import Affine, layers_of
from agentic_rl.verify.rounding import TANH_ULPS, network_dtype, unit_roundoff

Tensor = torch.Tensor


@dataclass
class PreTanhProblem:
    """``net`` up to its tanh and the rows ``spec_matrix [r, k] @ z <= spec_bias [r]`` on its
    output; no rows means the property holds for every input."""

    net: nn.Sequential
    spec_matrix: Tensor
    spec_bias: Tensor


def pre_tanh_problem(net: nn.Module, spec_matrix: Tensor, spec_bias: Tensor
                     ) -> PreTanhProblem | None:
    """The property on the pre-tanh values, or None where it does not reduce (the network does
    not end in tanh [+ an elementwise affine], a row mixes outputs, or a bound is out of the
    squashed range)."""
    layers = layers_of(net)
    affine = layers.pop() if layers and isinstance(layers[-1], Affine) else None
    if not layers or not isinstance(layers[-1], nn.Tanh) or (affine and affine.centre is not None):
        return None
    k = spec_matrix.shape[1]
    scale = affine.scale if affine is not None else torch.ones(k, dtype=torch.float64)
    shift = affine.shift if affine is not None else torch.zeros(k, dtype=torch.float64)
    dtype = network_dtype(net)
    u = unit_roundoff(dtype)
    # the squashed range's ends as the network computes them (rounding is monotone, so no
    # action lies beyond them)
    ends = (shift.to(dtype) - scale.to(dtype), shift.to(dtype) + scale.to(dtype))
    rows, biases = [], []
    for row, bias in zip(spec_matrix, spec_bias):
        nonzero = torch.nonzero(row).flatten()
        if nonzero.numel() != 1 or scale[nonzero[0]] <= 0:
            return None
        j = int(nonzero[0])
        coefficient, s, t = float(row[j]), float(scale[j]), float(shift[j])
        limit = float(bias) / coefficient
        if abs(coefficient) != 1.0:  # the division rounded: move the limit inwards
            limit += -1e-12 * (1 + abs(limit)) if coefficient > 0 else 1e-12 * (1 + abs(limit))
        rounding = 0.0 if affine is None else 2 * u * (1 + u) * (abs(s) + abs(t) + abs(limit))
        if coefficient > 0:  # a_j <= limit
            if float(ends[1][j]) <= limit:
                continue  # tanh <= 1: the action never exceeds the range's upper end
            threshold = (limit - t - rounding) / s - TANH_ULPS * u
            if threshold <= -1:
                return None
            rows.append(_unit(k, j, 1.0))
            biases.append(math.atanh(threshold) - 1e-12 * (1 + abs(math.atanh(threshold))))
        else:  # a_j >= limit
            if float(ends[0][j]) >= limit:
                continue
            threshold = (limit - t + rounding) / s + TANH_ULPS * u
            if threshold >= 1:
                return None
            rows.append(_unit(k, j, -1.0))
            biases.append(-math.atanh(threshold) - 1e-12 * (1 + abs(math.atanh(threshold))))
    matrix = torch.stack(rows) if rows else torch.zeros(0, k, dtype=torch.float64)
    return PreTanhProblem(nn.Sequential(*layers[:-1]), matrix,
                          torch.tensor(biases, dtype=torch.float64))


def _unit(k: int, j: int, sign: float) -> Tensor:
    row = torch.zeros(k, dtype=torch.float64)
    row[j] = sign
    return row
