"""Sound output bounds of a policy network over a box of inputs (capability V4).

Supported layers of an ``nn.Sequential`` (nested Sequentials are flattened): ``nn.Linear``,
``nn.ReLU``, ``nn.Tanh``, ``nn.LayerNorm`` (last dimension), ``nn.Identity`` and the two input
layers of ``layers.py``, :class:`Affine` (elementwise ``x * scale + shift``, e.g. the observation
normaliser ``(x - mean) / std``) and :class:`Clamp`. ``normalised_policy`` prepends them to the
actor's deterministic net so a box of *raw* states can be verified.

Two methods, both sound (every input in the box maps inside the bounds), computed in float64:

* **IBP** (interval bound propagation): intervals pushed layer by layer.
* **CROWN** (backward linear relaxation): each nonlinearity is enclosed between two lines valid on
  its input interval and the network is back-substituted to the input. A LayerNorm is enclosed
  between two parallel hyperplanes: its Jacobian at the box centre, with a mean-value remainder
  bounded by interval arithmetic on the Jacobian over the box (``layernorm_relaxation``).
  ReLU: chord as upper line, adaptive lower slope (1 if ``u > -l`` else 0). Tanh and Clamp: two
  lines parallel to the chord through ``[l, u]``, with intercepts given by the exact minimum and
  maximum of ``f(x) - slope * x`` over ``[l, u]`` (attained at the ends or at the stationary points
  ``+-acosh(1/sqrt(slope))`` for tanh, at the breakpoints for clamp). Pre-activation bounds are
  CROWN intersected with IBP; the bounds of monotone layers are the image of their input bounds.

Why not auto_LiRPA (checked 2026-12-02 in a throwaway venv with torch 2.13.0+cpu): the newest
PyPI release, auto_LiRPA 0.3, declares ``torch>=1.8.0,<1.13.0`` so pip refuses to resolve it
(ResolutionImpossible). Installed with ``--no-deps`` it fails on import: with numpy 2,
``ModuleNotFoundError: No module named 'numpy.lib.arraysetops'``; with numpy 1.26,
``ImportError: cannot import name '_set_opset_version' from 'torch.onnx.symbolic_helper'``.
So the MLP case is implemented here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from agentic_rl.verify.layers import (
    Affine,
    Clamp,
    layernorm_interval,
    layernorm_relaxation,
    layers_of,
    linear_parts,
    monotone,
    normalised_policy,
    relaxation,
)

__all__ = ["Affine", "Clamp", "CrownState", "LinearBounds", "crown_bounds", "crown_intermediate",
           "crown_linear_bounds", "interval_bounds", "layernorm_interval", "normalised_policy"]

Tensor = torch.Tensor
_DT = torch.float64


def _boxes(low: Tensor, high: Tensor) -> tuple[Tensor, Tensor, bool]:
    low = torch.as_tensor(low, dtype=_DT).detach()
    high = torch.as_tensor(high, dtype=_DT).detach()
    if low.shape != high.shape or low.dim() not in (1, 2):
        raise ValueError(f"low/high must both be [d] or [B, d], got {low.shape} and {high.shape}")
    if (low > high).any():
        raise ValueError("every low must be <= the matching high")
    single = low.dim() == 1
    return (low[None], high[None], single) if single else (low, high, single)


def ibp_layer(layer: nn.Module, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
    if isinstance(layer, (nn.Linear, Affine)):
        weight, bias = linear_parts(layer)
        mid, rad = (lo + hi) / 2, (hi - lo) / 2
        if isinstance(layer, Affine):
            return mid * weight + bias - rad * weight.abs(), mid * weight + bias + rad * weight.abs()
        centre, radius = mid @ weight.T + bias, rad @ weight.abs().T
        return centre - radius, centre + radius
    if isinstance(layer, nn.LayerNorm):
        return layernorm_interval(layer, lo, hi)
    return monotone(layer, lo), monotone(layer, hi)


def interval_bounds(net: nn.Module, low: Tensor, high: Tensor) -> tuple[Tensor, Tensor]:
    """IBP bounds of ``net`` over the box ``[low, high]``.

    Args:
        net: supported ``nn.Sequential``.
        low, high: ``[d]`` or ``[B, d]`` (B boxes at once).

    Returns:
        ``(lo, hi)``, ``[k]`` or ``[B, k]`` float64.
    """
    lo, hi, single = _boxes(low, high)
    for layer in layers_of(net):
        lo, hi = ibp_layer(layer, lo, hi)
    return (lo[0], hi[0]) if single else (lo, hi)


@dataclass
class LinearBounds:
    """``lA x + lb <= C y <= uA x + ub`` for x in the input box; ``A [B, k, d]``, ``b [B, k]``."""

    lA: Tensor
    lb: Tensor
    uA: Tensor
    ub: Tensor
    lo: Tensor
    hi: Tensor
    # bounds of each layer's input, then of the output (for rounding_bound)
    layer_bounds: list[tuple[Tensor, Tensor]] | None = None


def _backward(layers: list[nn.Module], relax: dict, spec: Tensor | None,
              box: tuple[Tensor, Tensor], rows: Tensor | None = None) -> LinearBounds:
    """Back-substitute ``spec [k, n_end]`` through ``layers`` down to the input ``box``.

    ``spec=None`` means the identity on the output of ``layers[-1]`` (restricted to ``rows`` if
    given), which must be a Linear: its weight rows are the starting coefficients. Coefficients
    stay one shared ``[k, n]`` matrix until the first relaxation, which is fused with the Linear
    ``[n, d]`` below it (``W+ @ (slope * W_prev)``) when ``k > d``, to avoid materialising
    ``[B, k, n]`` products.
    """
    batch, end = box[0].shape[0], len(layers)
    if spec is None:
        weight, bias = linear_parts(layers[-1])
        if rows is not None:
            weight, bias = weight[rows], bias[rows]
        uA = lA = weight
        ub = lb = bias.expand(batch, -1)
        end -= 1
    else:
        uA = lA = spec
        ub = lb = torch.zeros(batch, spec.shape[0], dtype=_DT)
    index = end - 1
    while index >= 0:
        layer = layers[index]
        if isinstance(layer, (nn.Linear, Affine)):
            weight, bias = linear_parts(layer)
            ub, lb = ub + uA @ bias, lb + lA @ bias
            uA, lA = (uA * weight, lA * weight) if isinstance(layer, Affine) else (uA @ weight, lA @ weight)
        elif isinstance(layer, nn.LayerNorm):  # J x + lower <= LN(x) <= J x + upper
            jacobian, lower, upper = relax[index]
            ub = ub + _constant(uA, upper, lower)
            lb = lb + _constant(lA, lower, upper)
            uA, lA = uA @ jacobian, lA @ jacobian
        elif (uA.dim() == 2 and index >= 1 and isinstance(layers[index - 1], nn.Linear)
              and uA.shape[0] > layers[index - 1].in_features):  # fusing is cheaper only then
            (uA, ub), (lA, lb) = _fused_relaxation_linear(uA, ub, lb, relax[index], layers[index - 1])
            index -= 1
        else:
            ls, lbias, us, ubias = relax[index]
            (uA, ub), (lA, lb) = (_through_relaxation(uA, ub, us, ubias, ls, lbias),
                                  _through_relaxation(lA, lb, ls, lbias, us, ubias))
        index -= 1
    mid, rad = ((box[0] + box[1]) / 2)[:, :, None], ((box[1] - box[0]) / 2)[:, :, None]
    hi = (uA @ mid + uA.abs() @ rad)[..., 0] + ub
    lo = (lA @ mid - lA.abs() @ rad)[..., 0] + lb
    if uA.dim() == 2:
        uA, lA = uA.expand(batch, -1, -1), lA.expand(batch, -1, -1)
    return LinearBounds(lA, lb, uA, ub, lo, hi)


def _constant(coef: Tensor, positive_side: Tensor, negative_side: Tensor) -> Tensor:
    """``coef+ @ positive_side + coef- @ negative_side`` for ``coef [k, n]`` or ``[B, k, n]``
    and sides ``[B, n]`` -> ``[B, k]``."""
    positive = coef.clamp_min(0)
    return ((positive @ positive_side[..., None]) + ((coef - positive)
                                                      @ negative_side[..., None]))[..., 0]


def _fused_relaxation_linear(coef: Tensor, ub: Tensor, lb: Tensor, relax: tuple[Tensor, ...],
                             linear: nn.Linear) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Shared ``coef [k, n]`` through a relaxation and the Linear ``[n, d]`` feeding it.

    Returns ``((uA [B, k, d], ub [B, k]), (lA, lb))``.
    """
    ls, lbias, us, ubias = relax
    weight, bias = linear_parts(linear)
    positive, negative = coef.clamp_min(0), coef.clamp_max(0)
    ub = ub + ubias @ positive.T + lbias @ negative.T + (us * bias) @ positive.T + (ls * bias) @ negative.T
    lb = lb + lbias @ positive.T + ubias @ negative.T + (ls * bias) @ positive.T + (us * bias) @ negative.T
    scaled_upper, scaled_lower = us[:, :, None] * weight, ls[:, :, None] * weight
    uA = positive @ scaled_upper + negative @ scaled_lower
    lA = uA if torch.equal(ls, us) else positive @ scaled_lower + negative @ scaled_upper
    return (uA, ub), (lA, lb)


def _through_relaxation(coef: Tensor, const: Tensor, pos_slope: Tensor, pos_bias: Tensor,
                        neg_slope: Tensor, neg_bias: Tensor) -> tuple[Tensor, Tensor]:
    """Replace ``f(z)`` in ``coef [B, k, n] @ f(z) + const [B, k]`` by its relaxation lines.

    Positive coefficients take the ``pos_*`` line, negative ones the ``neg_*`` line (each ``[B, n]``).
    """
    positive = coef.clamp_min(0)
    negative = coef - positive
    const = const + (positive @ pos_bias[..., None] + negative @ neg_bias[..., None])[..., 0]
    if torch.equal(pos_slope, neg_slope):
        return coef * pos_slope[:, None, :], const
    return positive * pos_slope[:, None, :] + negative * neg_slope[:, None, :], const


@dataclass
class CrownState:
    """Everything the final back-substitution needs: flattened ``layers``, the relaxation of every
    nonlinear layer (by index), the input ``box``, and the sound output bounds
    ``lo, hi [B, n_out]``."""

    layers: list[nn.Module]
    relax: dict[int, tuple[Tensor, ...]]
    box: tuple[Tensor, Tensor]
    lo: Tensor
    hi: Tensor
    inputs: list[tuple[Tensor, Tensor]]  # bounds of each layer's input


def crown_intermediate(net: nn.Module, low: Tensor, high: Tensor) -> CrownState:
    """Pre-activation bounds and relaxations of every layer over boxes ``[B, d]`` (or ``[d]``).

    Pre-activation bounds are refined by CROWN only where it can matter: not for a linear layer
    applied directly to the input box (IBP is exact there) and, before a ReLU, only for neurons
    that IBP leaves unstable in some box of the batch.
    """
    lo, hi, _ = _boxes(low, high)
    layers = layers_of(net)
    relax: dict[int, tuple[Tensor, ...]] = {}
    box, inputs = (lo, hi), []
    for index, layer in enumerate(layers):
        inputs.append((lo, hi))
        if isinstance(layer, nn.LayerNorm):
            relax[index] = layernorm_relaxation(layer, lo, hi)
            jacobian, lower, upper = relax[index]
            mid, rad = ((lo + hi) / 2)[..., None], ((hi - lo) / 2)[..., None]
            centre, spread = (jacobian @ mid)[..., 0], (jacobian.abs() @ rad)[..., 0]
            ln_lo, ln_hi = layernorm_interval(layer, lo, hi)
            lo, hi = torch.maximum(ln_lo, centre - spread + lower), torch.minimum(
                ln_hi, centre + spread + upper)
            continue
        if not isinstance(layer, (nn.Linear, Affine)):
            relax[index] = relaxation(layer, lo, hi)
            lo, hi = monotone(layer, lo), monotone(layer, hi)
            continue
        lo, hi = ibp_layer(layer, lo, hi)
        following = layers[index + 1] if index + 1 < len(layers) else None
        if index == 0 or following is None or isinstance(following, (nn.Linear, Affine)):
            continue
        rows = None
        if isinstance(following, nn.ReLU):
            rows = torch.nonzero(((lo < 0) & (hi > 0)).any(0))[:, 0]
            if rows.numel() == 0:
                continue
        if isinstance(layer, nn.Linear):
            crown = _backward(layers[: index + 1], relax, None, box, rows)
        else:
            eye = torch.eye(lo.shape[-1], dtype=_DT)
            eye = eye if rows is None else eye[rows]
            crown = _backward(layers[: index + 1], relax, eye, box)
        if rows is None:
            lo, hi = torch.maximum(lo, crown.lo), torch.minimum(hi, crown.hi)
        else:
            lo[:, rows] = torch.maximum(lo[:, rows], crown.lo)
            hi[:, rows] = torch.minimum(hi[:, rows], crown.hi)
    return CrownState(layers, relax, box, lo, hi, inputs)


def crown_linear_bounds(net: nn.Module, low: Tensor, high: Tensor,
                        spec: Tensor | None = None) -> LinearBounds:
    """CROWN bounds of ``spec @ net(x)`` over boxes ``low, high [B, d]`` (or ``[d]``).

    ``spec [k, n_out]`` (default identity). Returns linear and concrete bounds, batched ``[B, ...]``.
    """
    state = crown_intermediate(net, low, high)
    spec = check_spec(spec, state.lo.shape[-1])
    result = _backward(state.layers, state.relax, spec, state.box)
    result.lo, result.hi = intersect_spec(result.lo, result.hi, spec, state.lo, state.hi)
    result.layer_bounds = [*state.inputs, (state.lo, state.hi)]
    return result


def check_spec(spec: Tensor | None, n_out: int) -> Tensor:
    """``spec [k, n_out]`` as float64 (identity when None); raises on a wrong shape."""
    spec = torch.eye(n_out, dtype=_DT) if spec is None else torch.as_tensor(spec, dtype=_DT)
    if spec.dim() != 2 or spec.shape[1] != n_out:
        raise ValueError(f"spec must be [k, {n_out}] for this network, got {tuple(spec.shape)}")
    return spec


def intersect_spec(lo: Tensor, hi: Tensor, spec: Tensor, out_lo: Tensor, out_hi: Tensor
                   ) -> tuple[Tensor, Tensor]:
    """Tighten spec bounds ``[B, k]`` with the interval image of output bounds ``[B, n_out]``."""
    spec_pos, spec_neg = spec.clamp_min(0), spec.clamp_max(0)
    return (torch.maximum(lo, out_lo @ spec_pos.T + out_hi @ spec_neg.T),
            torch.minimum(hi, out_hi @ spec_pos.T + out_lo @ spec_neg.T))


def crown_bounds(net: nn.Module, low: Tensor, high: Tensor,
                 spec: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """CROWN bounds ``(lo, hi)`` of ``spec @ net(x)``: ``[k]`` for one box, ``[B, k]`` for many."""
    single = torch.as_tensor(low).dim() == 1
    result = crown_linear_bounds(net, low, high, spec)
    return (result.lo[0], result.hi[0]) if single else (result.lo, result.hi)
