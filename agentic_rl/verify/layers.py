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
    """Elementwise ``x * scale + shift``; ``scale, shift [d]`` kept in float64 (cast on use)."""

    def __init__(self, scale: Tensor, shift: Tensor) -> None:
        super().__init__()
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float64).clone())
        self.register_buffer("shift", torch.as_tensor(shift, dtype=torch.float64).clone())

    @classmethod
    def normaliser(cls, mean: Tensor, var: Tensor, eps: float = 1e-8) -> "Affine":
        """``(x - mean) / sqrt(var + eps)`` as an Affine layer."""
        std = torch.sqrt(torch.as_tensor(var, dtype=torch.float64) + eps)
        mean = torch.as_tensor(mean, dtype=torch.float64)
        return cls(1.0 / std, -mean / std)

    def forward(self, x: Tensor) -> Tensor:
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
    """``net(clamp((x - mean) / sqrt(var + eps), -clip, clip))`` as one Sequential.

    ``mean, var [d]`` are the concatenated observation/goal normaliser statistics.
    """
    return nn.Sequential(Affine.normaliser(mean, var, eps), Clamp(-clip, clip), *layers_of(net))


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


def layernorm_interval(layer: nn.LayerNorm, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
    """Interval bounds of a LayerNorm, ``[B, n] -> [B, n]``.

    The centred value ``c = x - mean(x)`` is linear (exact interval); the variance is bounded by
    the per-entry extremes of ``c^2``; ``|c_i| / sqrt(var + eps) <= sqrt(n - 1)`` caps the result.
    """
    n = lo.shape[-1]
    centre_map = torch.eye(n, dtype=_DT) - 1.0 / n
    mid, rad = (lo + hi) / 2, (hi - lo) / 2
    c_mid, c_rad = mid @ centre_map.T, rad @ centre_map.abs().T
    c_lo, c_hi = c_mid - c_rad, c_mid + c_rad
    sq_lo = torch.where(c_lo > 0, c_lo**2, torch.where(c_hi < 0, c_hi**2, torch.zeros_like(c_lo)))
    sq_hi = torch.maximum(c_lo**2, c_hi**2)
    inv_lo = 1.0 / torch.sqrt(sq_hi.mean(-1, keepdim=True) + layer.eps)
    inv_hi = 1.0 / torch.sqrt(sq_lo.mean(-1, keepdim=True) + layer.eps)
    cap = math.sqrt(max(n - 1, 0))
    y_lo = torch.minimum(c_lo * inv_lo, c_lo * inv_hi).clamp(-cap, cap)
    y_hi = torch.maximum(c_hi * inv_lo, c_hi * inv_hi).clamp(-cap, cap)
    if layer.weight is None:
        return y_lo, y_hi
    weight = layer.weight.detach().to(_DT)
    bias = layer.bias.detach().to(_DT) if layer.bias is not None else torch.zeros_like(weight)
    out_a, out_b = y_lo * weight + bias, y_hi * weight + bias
    return torch.minimum(out_a, out_b), torch.maximum(out_a, out_b)


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
