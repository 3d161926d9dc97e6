"""Bound propagation: hand-computed cases, property-based soundness and tightness."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.bounds import (
    Affine,
    Clamp,
    crown_bounds,
    crown_linear_bounds,
    interval_bounds,
    layernorm_interval,
    normalised_policy,
)

torch.set_num_threads(1)


def hand_net() -> nn.Sequential:
    """y = relu(x1 + x2) + relu(x1 - x2); over [-1, 1]^2 its true range is [0, 2]."""
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[1.0, 1.0]]))
        net[2].bias.zero_()
    return net


def test_ibp_and_crown_match_hand_computation():
    net, low, high = hand_net(), -torch.ones(2), torch.ones(2)
    ibp_lo, ibp_hi = interval_bounds(net, low, high)
    # IBP: both pre-activations in [-2, 2] -> both ReLUs in [0, 2] -> y in [0, 4].
    assert ibp_lo.tolist() == [0.0] and ibp_hi.tolist() == [4.0]
    # CROWN: l=-2, u=2 -> upper line 0.5 z + 1, lower slope 0 (u > -l is false);
    # y <= 0.5(x1+x2) + 1 + 0.5(x1-x2) + 1 = x1 + 2 <= 3.
    crown_lo, crown_hi = crown_bounds(net, low, high)
    assert crown_lo.tolist() == [0.0] and crown_hi.tolist() == [3.0]
    linear = crown_linear_bounds(net, low, high)
    torch.testing.assert_close(linear.uA[0], torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    torch.testing.assert_close(linear.ub[0], torch.tensor([2.0], dtype=torch.float64))


def test_affine_normaliser_and_clamp_layers():
    norm = Affine.normaliser(torch.tensor([1.0, -2.0]), torch.tensor([4.0, 0.25]), eps=0.0)
    x = torch.tensor([[3.0, -1.0]])
    torch.testing.assert_close(norm(x), torch.tensor([[1.0, 2.0]]))
    net = nn.Sequential(norm, Clamp(-1.5, 1.5))
    lo, hi = interval_bounds(net, torch.tensor([3.0, -1.0]), torch.tensor([5.0, 0.0]))
    assert lo.tolist() == [1.0, 1.5] and hi.tolist() == [1.5, 1.5]
    lo, hi = crown_bounds(net, torch.tensor([-1.0, -3.0]), torch.tensor([3.0, -2.0]))
    assert lo.tolist() == [-1.0, -1.5] and hi.tolist() == [1.0, 0.0]


def test_layernorm_interval_contains_degenerate_box_value():
    layer = nn.LayerNorm(4)
    x = torch.tensor([[0.3, -1.0, 2.0, 0.5]], dtype=torch.float64)
    lo, hi = layernorm_interval(layer, x, x)
    y = layer.double()(x)
    assert (lo <= y + 1e-12).all() and (y <= hi + 1e-12).all()
    assert (hi - lo).max() < 1e-9


def test_unsupported_layer_is_named():
    try:
        interval_bounds(nn.Sequential(nn.Linear(2, 2), nn.Sigmoid()), torch.zeros(2), torch.ones(2))
    except TypeError as err:
        assert "Sigmoid" in str(err)
    else:
        raise AssertionError("Sigmoid must be rejected")


@st.composite
def random_net_and_box(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    in_dim = draw(st.integers(1, 5))
    widths = draw(st.lists(st.integers(2, 8), min_size=1, max_size=3))
    kinds = draw(st.lists(st.sampled_from(["relu", "tanh", "layernorm", "clamp"]),
                          min_size=len(widths), max_size=len(widths)))
    scale = draw(st.floats(0.01, 3.0))
    return seed, in_dim, widths, kinds, scale


def build(seed, in_dim, widths, kinds) -> tuple[nn.Sequential, torch.Generator]:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layers, width = [], in_dim
    for hidden, kind in zip(widths, kinds):
        layers.append(nn.Linear(width, hidden))
        layers.append({"relu": nn.ReLU(), "tanh": nn.Tanh(), "clamp": Clamp(-0.5, 0.7),
                       "layernorm": nn.LayerNorm(hidden)}[kind])
        width = hidden
    layers += [nn.Linear(width, 3), nn.Tanh()]
    net = nn.Sequential(*layers).double()
    with torch.no_grad():  # random LayerNorm affine parameters, not the trivial 1 / 0
        for layer in net:
            if isinstance(layer, nn.LayerNorm):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen, dtype=torch.float64))
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen, dtype=torch.float64))
    return net, gen


@settings(max_examples=30, deadline=None)
@given(random_net_and_box())
def test_sampled_outputs_never_leave_bounds(case):
    seed, in_dim, widths, kinds, scale = case
    net, gen = build(seed, in_dim, widths, kinds)
    centre = torch.randn(in_dim, generator=gen, dtype=torch.float64)
    radius = scale * torch.rand(in_dim, generator=gen, dtype=torch.float64)
    low, high = centre - radius, centre + radius
    samples = low + (high - low) * torch.rand(10_000, in_dim, generator=gen, dtype=torch.float64)
    samples = torch.cat([samples, low[None], high[None]])
    with torch.no_grad():
        outputs = net(samples)
    for lo, hi in (interval_bounds(net, low, high), crown_bounds(net, low, high)):
        assert (outputs >= lo - 1e-9).all() and (outputs <= hi + 1e-9).all()
    ibp_lo, ibp_hi = interval_bounds(net, low, high)
    crown_lo, crown_hi = crown_bounds(net, low, high)
    assert (crown_hi - crown_lo <= ibp_hi - ibp_lo + 1e-9).all()


def test_batched_boxes_match_single_boxes():
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2), nn.Tanh())
    low = torch.randn(4, 3)
    high = low + 0.5
    batch_lo, batch_hi = crown_bounds(net, low, high)
    for i in range(4):
        lo, hi = crown_bounds(net, low[i], high[i])
        torch.testing.assert_close(batch_lo[i], lo)
        torch.testing.assert_close(batch_hi[i], hi)


def test_crown_much_tighter_than_ibp_on_actor_small_box():
    torch.manual_seed(0)
    actor = TanhGaussianActor(13, 4, [64, 64])
    policy = normalised_policy(actor.deterministic_net(), torch.zeros(13), torch.full((13,), 0.04))
    state = 0.1 * torch.randn(13)
    ibp_lo, ibp_hi = interval_bounds(policy, state - 0.01, state + 0.01)
    crown_lo, crown_hi = crown_bounds(policy, state - 0.01, state + 0.01)
    assert ((ibp_hi - ibp_lo).mean() / (crown_hi - crown_lo).mean()) > 3.0


def test_unusual_layer_orders_stay_sound():
    torch.manual_seed(7)
    net = nn.Sequential(
        nn.ReLU(), nn.Linear(3, 5, bias=False), nn.Linear(5, 4), nn.Tanh(), nn.LayerNorm(4),
        nn.Identity(), nn.Sequential(nn.Linear(4, 4), Clamp(torch.tensor([-0.2, -1.0, 0.0, -5.0]),
                                                           torch.tensor([0.3, 1.0, 0.1, 5.0]))),
        nn.Linear(4, 2), nn.ReLU(), nn.Linear(2, 2),
    ).double()
    low = torch.tensor([-1.0, -0.5, 0.2], dtype=torch.float64)
    high = torch.tensor([1.0, 0.5, 0.9], dtype=torch.float64)
    samples = low + (high - low) * torch.rand(10_000, 3, dtype=torch.float64)
    with torch.no_grad():
        outputs = net(samples)
    for lo, hi in (interval_bounds(net, low, high), crown_bounds(net, low, high)):
        assert (outputs >= lo - 1e-9).all() and (outputs <= hi + 1e-9).all()


def test_a_relu_crossing_zero_on_a_tiny_interval_keeps_its_chord():
    """A pre-activation interval narrower than 1e-12 that crosses zero, then a huge weight: the
    upper bound must still cover relu at the top of the interval (it once used width 1 there
    and proved a bound that x = 1 breaks)."""
    from agentic_rl.verify.layers import relaxation

    lo, hi = torch.tensor([[-1e-13]], dtype=torch.float64), torch.tensor([[2e-13]],
                                                                          dtype=torch.float64)
    _, _, upper_slope, upper_bias = relaxation(nn.ReLU(), lo, hi)
    # the chord through (lo, 0) and (hi, hi), up to float64 rounding (about 1e-29 here)
    assert (upper_slope * hi + upper_bias - hi).abs().item() < 1e-25
    assert (upper_slope * lo + upper_bias).abs().item() < 1e-25
    net = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 1)).double()
    with torch.no_grad():
        net[0].weight.fill_(1e-13)
        net[0].bias.zero_()
        net[2].weight.fill_(1e13)
        net[2].bias.zero_()
    low, high = torch.tensor([-1.0], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64)
    _, crown_hi = crown_bounds(net, low, high)
    true_max = net(high[None]).item()  # x = 1: relu(1e-13) * 1e13 = 1
    assert crown_hi.item() >= true_max - 1e-9 and true_max == pytest.approx(1.0)
