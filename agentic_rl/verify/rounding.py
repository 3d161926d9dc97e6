"""A rigorous bound on how far the network computed in floating point can be from the exact
(real-number) network that ``bounds.py`` bounds, over a box of inputs.

The deployed actor runs in float32 (``u = 2^-24``): the input is rounded to float32, every
matrix product is summed in an order the BLAS chooses, tanh comes from a vector math library.
Standard error analysis (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1) bounds
each step whatever the order: a dot product of ``n`` terms plus a bias is within
``gamma_{n+1} (|W| |h| + |b|)`` of the exact one, ``gamma_n = n u / (1 - n u)``; an input error
``e`` reaches the output through ``|W| e``; ReLU and clamp are exact and 1-Lipschitz; tanh adds
at most ``TANH_ULPS`` units in the last place (an assumption about the math library, checked
for torch's float32 tanh in ``tests/unit/test_verify_rounding.py``). ``|h|`` is bounded by
interval bounds of each layer's input over the box. The result is an elementwise bound
``E [B, k]`` with ``|f_float(x) - f(x)| <= E`` for every ``x`` of the network's precision in each
box; a proof then needs ``spec @ f(x) <= bias - |spec| @ E``. The region's inputs reach the
network rounded to its precision (``fl(x)``); ``received`` gives the box they land in.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from agentic_rl.verify.bounds import ibp_layer
from agentic_rl.verify.layers import Affine, Clamp, layers_of, linear_parts, min_variance

Tensor = torch.Tensor
TANH_ULPS = 8.0  # torch's float32 / float64 tanh: measured within 2 ulp; 8 assumed


def unit_roundoff(dtype: torch.dtype) -> float:
    """``u``: half the distance from 1 to the next number of ``dtype``."""
    return torch.finfo(dtype).eps / 2


def gamma(n: int, u: float) -> float:
    """``n u / (1 - n u)``: the relative error bound of ``n`` floating-point operations."""
    if n * u >= 1:
        return math.inf
    return n * u / (1 - n * u)


def network_dtype(net: nn.Module) -> torch.dtype:
    """The precision the network runs in (its first parameter's; float32 without any)."""
    param = next(net.parameters(), None)
    return param.dtype if param is not None else torch.float32


def received(low: Tensor, high: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """The box of ``dtype`` inputs the network receives from the float64 box ``[low, high]``:
    rounding to nearest is monotone, so ``fl(x)`` lies in ``[fl(low), fl(high)]`` for every
    ``x`` of the box (as float64 values)."""
    if dtype == torch.float64:
        return low, high
    return low.to(dtype).double(), high.to(dtype).double()


def rounding_bound(net: nn.Module, low: Tensor, high: Tensor,
                   dtype: torch.dtype | None = None,
                   layer_bounds: list[tuple[Tensor, Tensor]] | None = None) -> Tensor:
    """``E [B, k]``: ``|net_float(x) - net_exact(x)| <= E`` for every ``x`` of ``dtype`` in each
    box ``[low, high]`` (``[B, d]``), the network run in ``dtype`` (default: its own).
    ``layer_bounds``: sound bounds of every layer's input, then of the output
    (``LinearBounds.layer_bounds``, tighter than the interval pass used without them)."""
    u = unit_roundoff(dtype or network_dtype(net))
    layers = layers_of(net)
    if layer_bounds is None:
        layer_bounds = [(low.to(torch.float64), high.to(torch.float64))]
        for layer in layers:
            layer_bounds.append(ibp_layer(layer, *layer_bounds[-1]))
    error = torch.zeros_like(low, dtype=torch.float64)
    for index, layer in enumerate(layers):
        (lo, hi), (out_lo, out_hi) = layer_bounds[index], layer_bounds[index + 1]
        magnitude = torch.maximum(lo.abs(), hi.abs())
        out_magnitude = torch.maximum(out_lo.abs(), out_hi.abs())
        error = _layer_error(layer, error, magnitude, out_magnitude, lo, hi, u)
    return error


def _layer_error(layer: nn.Module, error: Tensor, magnitude: Tensor, out_magnitude: Tensor,
                 lo: Tensor, hi: Tensor, u: float) -> Tensor:
    """The output error bound of one layer from its input's error and magnitude bounds."""
    if isinstance(layer, nn.Linear):
        weight, bias = linear_parts(layer)
        absolute = weight.abs()
        g = gamma(weight.shape[1] + 1, u)
        return error @ absolute.T + g * ((magnitude + error) @ absolute.T + bias.abs())
    if isinstance(layer, Affine):
        scale = layer.scale.abs()
        if layer.centre is not None:  # fl(fl(x - c) * s)
            centred = torch.maximum((lo - layer.centre).abs(), (hi - layer.centre).abs())
            difference = error + u * (centred + error)
            return scale * difference + u * scale * (centred + difference)
        # x * s + t in any order (or fused): two roundings of magnitudes at most these
        return scale * error + 2 * u * (1 + u) * (scale * (magnitude + error)
                                                  + layer.shift.abs() + out_magnitude)
    if isinstance(layer, (nn.ReLU, Clamp)):
        return error  # exact and 1-Lipschitz
    if isinstance(layer, nn.Tanh):
        return error + TANH_ULPS * u  # 1-Lipschitz; |tanh| <= 1 so an ulp is at most u
    if isinstance(layer, nn.LayerNorm):
        return _layernorm_error(layer, error, magnitude, lo, hi, u)
    raise TypeError(f"no rounding bound for layer {type(layer).__name__}")


def _layernorm_error(layer: nn.LayerNorm, error: Tensor, magnitude: Tensor, lo: Tensor,
                     hi: Tensor, u: float) -> Tensor:
    """LayerNorm ``y = F(c) = w c / sqrt(mean(c^2) + eps) + b`` of the centred ``c = x - mean(x)``
    in floating point.

    The computed centred values are within ``d_j = e_j + mean(e) + gamma_{n+1} max|x| +
    4 u |x|_j`` of the exact ones (input error, the mean's rounding, the subtraction; enough
    too for kernels that compute ``x * (w / s) + (b - mean w / s)``). By the mean value theorem
    ``|F(c') - F(c)| <= K d`` with ``K_ij = |w_i| (delta_ij / s + |c_i| |c_j| / (n s^3))``
    bounded over the centred box widened by ``d`` (``s`` at least the box's smallest less the
    root mean square of ``d``, or from the widened box's smallest ``mean(c^2)``); the
    variance, square root, division and the affine add ``gamma_{n+6}`` of ``|y|``."""
    n = lo.shape[-1]
    centre_map = torch.eye(n, dtype=torch.float64) - 1.0 / n
    mid, rad = (lo + hi) / 2, (hi - lo) / 2
    c_lo, c_hi = mid @ centre_map.T - rad @ centre_map.abs().T, mid @ centre_map.T + \
        rad @ centre_map.abs().T
    drift = (error + error.mean(-1, keepdim=True) + gamma(n + 1, u) * (
        magnitude + error).amax(-1, keepdim=True) + 4 * u * (magnitude + error))
    c_lo, c_hi = c_lo - drift, c_hi + drift
    reach = torch.maximum(c_lo.abs(), c_hi.abs())
    sq_lo = torch.where(c_lo > 0, c_lo**2, torch.where(c_hi < 0, c_hi**2, torch.zeros_like(c_lo)))
    # s along the segment from c to the computed c': at least the box's own smallest s less
    # the drift's root mean square (the triangle inequality of a norm)
    s_shifted = torch.sqrt(min_variance(lo, hi)[..., None] + layer.eps) - (
        drift * drift).mean(-1, keepdim=True).sqrt()
    s_min = torch.maximum(torch.sqrt(sq_lo.mean(-1, keepdim=True) + layer.eps), s_shifted)
    normalised = drift / s_min + reach * (reach * drift).sum(-1, keepdim=True) / (n * s_min**3)
    cap = math.sqrt(max(n - 1, 0))
    size = torch.minimum(reach / s_min, torch.full_like(reach, cap))  # |c_i| / s
    if layer.weight is None:
        return normalised + gamma(n + 6, u) * size
    weight = layer.weight.detach().to(torch.float64).abs()
    bias = (layer.bias.detach().to(torch.float64).abs() if layer.bias is not None
            else torch.zeros_like(weight))
    return weight * normalised + gamma(n + 8, u) * (weight * size + bias)
