"""Layers the verifier understands, and sound per-layer bounds (used by ``bounds.py``).

``Affine`` and ``Clamp`` let the observation normaliser ``clamp((x - mean) / std, -c, c)`` sit in
front of the actor so boxes of raw states can be verified (``normalised_policy``).
``layernorm_interval`` bounds a LayerNorm by interval arithmetic; ``relaxation`` gives the two
lines enclosing ReLU / Tanh / Clamp on an input interval (see ``bounds.py`` for the method).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

Tensor = torch.Tensor
_DT = torch.float64
_ELEMENTWISE = (nn.ReLU, nn.Tanh)


class Affine(nn.Module):
    """Elementwise ``x * scale + shift``; ``scale, shift [d]`` kept in float64 (cast on use).

    With ``centre`` it computes ``(x - centre) * scale`` instead, as the agent's normaliser does
    (``shift`` is then ``-centre * scale``, exact in float64 for float32 values); the rounding
    bound (``rounding.py``) follows whichever form runs."""

    def __init__(self, scale: Tensor, shift: Tensor | None = None,
                 centre: Tensor | None = None) -> None:
        super().__init__()
        scale = torch.as_tensor(scale, dtype=torch.float64).clone()
        if (shift is None) == (centre is None):
            raise ValueError("give Affine either a shift or a centre")
        if centre is not None:
            centre = torch.as_tensor(centre, dtype=torch.float64).clone()
            shift = -centre * scale
        self.register_buffer("scale", scale)
        self.register_buffer("shift", torch.as_tensor(shift, dtype=torch.float64).clone())
        self.register_buffer("centre", centre)

    @classmethod
    def normaliser(cls, mean: Tensor, var: Tensor, eps: float = 1e-8,
                   dtype: torch.dtype = torch.float64) -> "Affine":
        """``(x - mean) * rsqrt(var + eps)`` as the agent computes it: the statistics rounded
        to ``dtype`` first (``RunningNormalizer`` keeps float64 and acts in float32)."""
        var = torch.as_tensor(var, dtype=torch.float64)
        scale = torch.rsqrt(var + eps).to(dtype).to(torch.float64)
        mean = torch.as_tensor(mean, dtype=torch.float64).to(dtype).to(torch.float64)
        return cls(scale, centre=mean)

    def forward(self, x: Tensor) -> Tensor:
        if self.centre is not None:
            return (x - self.centre.to(x.dtype)) * self.scale.to(x.dtype)
        return x * self.scale.to(x.dtype) + self.shift.to(x.dtype)


class Clamp(nn.Module):
    """Elementwise ``clamp(x, low, high)``; limits are scalars or ``[d]`` (``+-inf`` = no limit)."""

    def __init__(self, low: float | Tensor, high: float | Tensor) -> None:
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float64).clone()
        high = torch.as_tensor(high, dtype=torch.float64).clone()
        if (low > high).any():
            raise ValueError(f"Clamp needs low <= high, got {low.tolist()} > {high.tolist()}")
        self.register_buffer("low", low)
        self.register_buffer("high", high)

    def forward(self, x: Tensor) -> Tensor:
        return torch.clamp(x, self.low.to(x.dtype), self.high.to(x.dtype))


def normalised_policy(
    net: nn.Sequential, mean: Tensor, var: Tensor, clip: float = 5.0, eps: float = 1e-8
) -> nn.Sequential:
    """``net(clamp((x - mean) * rsqrt(var + eps), -clip, clip))`` as one Sequential, with the
    statistics rounded to the network's precision as the agent rounds them.

    ``mean, var [d]`` are the concatenated observation/goal normaliser statistics.
    """
    param = next(net.parameters(), None)
    dtype = param.dtype if param is not None else torch.float64
    return nn.Sequential(Affine.normaliser(mean, var, eps, dtype), Clamp(-clip, clip),
                         *layers_of(net))


def layers_of(net: nn.Module) -> list[nn.Module]:
    """Flatten nested Sequentials and check every layer is supported."""
    if isinstance(net, nn.Sequential):
        return [layer for child in net for layer in layers_of(child)]
    if isinstance(net, nn.Identity):
        return []
    if isinstance(net, nn.LayerNorm) and len(net.normalized_shape) != 1:
        raise TypeError("only LayerNorm over the last dimension can be bounded")
    if isinstance(net, (nn.Linear, Affine, Clamp, nn.LayerNorm, *_ELEMENTWISE)):
        return [net]
    raise TypeError(
        f"cannot bound layer {type(net).__name__}; supported: Linear, ReLU, Tanh, LayerNorm, "
        "Identity, Affine, Clamp (wrap the policy as such an nn.Sequential)"
    )


def linear_parts(layer: nn.Module) -> tuple[Tensor, Tensor]:
    """``(W [out, in], b [out])`` of a Linear, or ``(scale [d], shift [d])`` of an Affine."""
    if isinstance(layer, Affine):
        return layer.scale.detach().to(_DT), layer.shift.detach().to(_DT)
    bias = layer.bias if layer.bias is not None else torch.zeros(layer.out_features)
    return layer.weight.detach().to(_DT), bias.detach().to(_DT)


def monotone(layer: nn.Module, x: Tensor) -> Tensor:
    """Apply a monotone elementwise layer (ReLU, Tanh, Clamp) to a bound tensor."""
    if isinstance(layer, nn.ReLU):
        return x.clamp_min(0.0)
    if isinstance(layer, nn.Tanh):
        return torch.tanh(x)
    return torch.clamp(x, layer.low, layer.high)


def min_variance(lo: Tensor, hi: Tensor) -> Tensor:
    """``[B]``: the smallest (biased) variance of any ``x`` in each box ``[lo, hi]`` (``[B, n]``).

    ``var(x) = min_m mean((x_i - m)^2)``, so the smallest over the box is ``min_m mean(dist(m,
    [lo_i, hi_i])^2)``: convex and piecewise quadratic in ``m``, its minimum lies at a
    breakpoint (some ``lo_i`` or ``hi_i``) or at the stationary point of a piece, all of which
    are tried. A relative 1e-12 (and absolute 1e-300) margin covers float64 rounding."""
    n = lo.shape[-1]
    breaks = torch.cat([lo, hi], -1).sort(-1).values  # [B, 2n]
    mids = (breaks[..., 1:] + breaks[..., :-1]) / 2  # a point inside each piece
    below = hi[..., None, :] < mids[..., None]  # [B, 2n - 1, n]: entries left of m
    above = lo[..., None, :] > mids[..., None]
    count = (below | above).sum(-1).clamp_min(1)
    stationary = ((hi[..., None, :] * below).sum(-1) + (lo[..., None, :] * above).sum(-1)) / count
    stationary = torch.minimum(torch.maximum(stationary, breaks[..., :-1]), breaks[..., 1:])
    candidates = torch.cat([breaks, stationary], -1)  # [B, 4n - 1]
    distance = (lo[..., None, :] - candidates[..., None]).clamp_min(0) + (
        candidates[..., None] - hi[..., None, :]).clamp_min(0)
    variance = (distance * distance).sum(-1).amin(-1) / n
    return (variance * (1 - 1e-12) - 1e-300).clamp_min(0.0)


def layernorm_interval(layer: nn.LayerNorm, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
    """Interval bounds of a LayerNorm, ``[B, n] -> [B, n]``.

    The centred value ``c = x - mean(x)`` is linear (exact interval); the variance lies between
    ``min_variance`` of the box and the mean of the per-entry largest ``c^2``;
    ``|c_i| / sqrt(var + eps) <= sqrt(n - 1)`` caps the result.
    """
    n = lo.shape[-1]
    centre_map = torch.eye(n, dtype=_DT) - 1.0 / n
    mid, rad = (lo + hi) / 2, (hi - lo) / 2
    c_mid, c_rad = mid @ centre_map.T, rad @ centre_map.abs().T
    c_lo, c_hi = c_mid - c_rad, c_mid + c_rad
    sq_lo = torch.where(c_lo > 0, c_lo**2, torch.where(c_hi < 0, c_hi**2, torch.zeros_like(c_lo)))
    sq_hi = torch.maximum(c_lo**2, c_hi**2)
    var_lo = torch.maximum(sq_lo.mean(-1), min_variance(lo, hi))[..., None]
    inv_lo = 1.0 / torch.sqrt(sq_hi.mean(-1, keepdim=True) + layer.eps)
    inv_hi = 1.0 / torch.sqrt(var_lo + layer.eps)
    cap = math.sqrt(max(n - 1, 0))
    y_lo = torch.minimum(c_lo * inv_lo, c_lo * inv_hi).clamp(-cap, cap)
    y_hi = torch.maximum(c_hi * inv_lo, c_hi * inv_hi).clamp(-cap, cap)
    if layer.weight is None:
        return y_lo, y_hi
    weight = layer.weight.detach().to(_DT)
    bias = layer.bias.detach().to(_DT) if layer.bias is not None else torch.zeros_like(weight)
    out_a, out_b = y_lo * weight + bias, y_hi * weight + bias
    return torch.minimum(out_a, out_b), torch.maximum(out_a, out_b)


def _layernorm_exact(layer: nn.LayerNorm, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """LayerNorm of ``x [B, n]`` in float64, with its centred input ``c`` and ``s``."""
    c = x - x.mean(-1, keepdim=True)
    s = torch.sqrt((c * c).mean(-1, keepdim=True) + layer.eps)
    y = c / s
    if layer.weight is not None:
        y = y * layer.weight.detach().to(_DT)
    if layer.bias is not None:
        y = y + layer.bias.detach().to(_DT)
    return y, c, s


def layernorm_relaxation(layer: nn.LayerNorm, lo: Tensor, hi: Tensor
                         ) -> tuple[Tensor, Tensor, Tensor]:
    """Two parallel linear bounds of a LayerNorm on the box ``[lo, hi]`` (``[B, n]``):
    ``J x + lower <= LN(x) <= J x + upper`` with ``J [B, n, n]`` its Jacobian at the centre.

    By the mean value theorem ``LN_i(x) = LN_i(x0) + grad LN_i(xi) . (x - x0)`` for some ``xi``
    in the box; ``dLN_i/dx_j = w_i (P_ij / s - c_i c_j / (n s^3))`` (``P = I - 1/n``) is bounded
    over the box by interval arithmetic on ``c`` (exact: linear) and ``s`` (between
    ``min_variance`` and the largest ``mean(c^2)``), so the remainder is within
    ``+-sum_j max|J_ij(box) - J_ij(x0)| r_j`` for the box's half-widths ``r``: second order in
    the box size, so small boxes get nearly exact bounds and CROWN goes through the layer."""
    n = lo.shape[-1]
    x0, r = (lo + hi) / 2, (hi - lo) / 2
    y0, c0, s0 = _layernorm_exact(layer, x0)
    centre_map = torch.eye(n, dtype=_DT) - 1.0 / n
    weight = (layer.weight.detach().to(_DT) if layer.weight is not None
              else torch.ones(n, dtype=_DT))
    jacobian = weight[:, None] * (centre_map / s0[..., None]
                                  - c0[..., :, None] * c0[..., None, :] / (n * s0[..., None] ** 3))
    c_mid, c_rad = x0 @ centre_map.T, r @ centre_map.abs().T
    c_lo, c_hi = c_mid - c_rad, c_mid + c_rad
    sq_hi = torch.maximum(c_lo**2, c_hi**2)
    s_lo = torch.sqrt(min_variance(lo, hi) + layer.eps)[..., None, None]
    s_hi = torch.sqrt(sq_hi.mean(-1) + layer.eps)[..., None, None]
    corners = torch.stack([c_lo[..., :, None] * c_lo[..., None, :],
                           c_lo[..., :, None] * c_hi[..., None, :],
                           c_hi[..., :, None] * c_lo[..., None, :],
                           c_hi[..., :, None] * c_hi[..., None, :]])
    cc_lo, cc_hi = corners.amin(0), corners.amax(0)
    cubes = torch.stack([cc_lo / s_lo**3, cc_lo / s_hi**3, cc_hi / s_lo**3, cc_hi / s_hi**3])
    term_lo, term_hi = cubes.amin(0) / n, cubes.amax(0) / n
    ratios = torch.stack([centre_map / s_lo, centre_map / s_hi])
    grad_lo = ratios.amin(0) - term_hi
    grad_hi = ratios.amax(0) - term_lo
    j_lo = torch.minimum(weight[:, None] * grad_lo, weight[:, None] * grad_hi)
    j_hi = torch.maximum(weight[:, None] * grad_lo, weight[:, None] * grad_hi)
    spread = torch.maximum((j_hi - jacobian).abs(), (jacobian - j_lo).abs())
    remainder = (spread @ r[..., None])[..., 0]
    remainder = remainder + 1e-12 * (1.0 + y0.abs() + (jacobian.abs() @ r[..., None])[..., 0])
    offset = y0 - (jacobian @ x0[..., None])[..., 0]
    return jacobian, offset - remainder, offset + remainder


def _parallel_lines(
    f_minus_line: Callable[[Tensor], Tensor], lo: Tensor, hi: Tensor, points: list[Tensor]
) -> tuple[Tensor, Tensor]:
    """Intercepts of the two parallel lines enclosing ``f`` on ``[lo, hi]``, each ``[B, n]``.

    ``f_minus_line(x)`` is ``f(x) - slope * x``; its extremes over ``[lo, hi]`` lie among
    ``points`` (clipped into the interval). A relative 1e-12 margin covers float64 rounding.
    """
    values = torch.stack([f_minus_line(p.clamp(lo, hi)) for p in points])
    scale = 1e-12 * (1.0 + values.abs().amax(0))
    return values.amin(0) - scale, values.amax(0) + scale


def relaxation(layer: nn.Module, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Linear bounds ``ls*x + lb <= f(x) <= us*x + ub`` valid on ``[lo, hi]``; all ``[B, n]``."""
    width = hi - lo
    tiny = width < 1e-12
    safe_width = torch.where(tiny, torch.ones_like(width), width)
    if isinstance(layer, nn.ReLU):
        # The chord over a crossing interval, however narrow (its width is at least hi > 0):
        # a placeholder width there would put the line below relu(hi).
        cross = (lo < 0) & (hi > 0)
        cross_width = torch.where(cross, width, torch.ones_like(width))
        upper_slope = torch.where(cross, hi / cross_width, (lo >= 0).to(_DT))
        upper_bias = torch.where(cross, -lo * hi / cross_width, torch.zeros_like(lo))
        lower_slope = torch.where(cross, (hi > -lo).to(_DT), (lo >= 0).to(_DT))
        return lower_slope, torch.zeros_like(lo), upper_slope, upper_bias
    if isinstance(layer, nn.Tanh):
        mid_slope = 1.0 - torch.tanh((lo + hi) / 2) ** 2
        chord = (torch.tanh(hi) - torch.tanh(lo)) / safe_width
        slope = torch.where(tiny, mid_slope, chord).clamp(0.0, 1.0)
        turn = torch.acosh(1.0 / torch.sqrt(slope.clamp_min(1e-300)))
        lower, upper = _parallel_lines(
            lambda x: torch.tanh(x) - slope * x, lo, hi, [lo, hi, turn, -turn]
        )
        return slope, lower, slope, upper
    out_lo, out_hi = monotone(layer, lo), monotone(layer, hi)
    slope = torch.where(tiny, ((lo >= layer.low) & (hi <= layer.high)).to(_DT),
                        (out_hi - out_lo) / safe_width)
    breaks = [lo, hi, layer.low.expand_as(lo), layer.high.expand_as(lo)]
    lower, upper = _parallel_lines(lambda x: monotone(layer, x) - slope * x, lo, hi, breaks)
    return slope, lower, slope, upper
