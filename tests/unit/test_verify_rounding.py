"""Soundness for the policy that runs: the rounding bound against float32 evaluations, the
rebuilt policy bit-identical to the agent's normaliser, proofs before the tanh, the variance
bound behind LayerNorm bounds."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.normalizer import RunningNormalizer
from agentic_rl.verify.layers import Affine, Clamp, min_variance
from agentic_rl.verify.policy import policy_from_tensors
from agentic_rl.verify.prove import verify_action_property
from agentic_rl.verify.rounding import TANH_ULPS, rounding_bound

torch.set_num_threads(1)


def test_float32_tanh_is_within_the_assumed_ulps():
    z = torch.cat([torch.linspace(-12, 12, 400_001, dtype=torch.float64),
                   torch.logspace(-30, 1, 10_001, dtype=torch.float64)])
    z32 = z.float()
    exact = torch.tanh(z32.double())
    error = (torch.tanh(z32).double() - exact).abs()
    ulp = torch.finfo(torch.float32).eps / 2 * exact.abs().clamp_min(torch.finfo(torch.float32).tiny)
    assert float((error / ulp).max()) <= TANH_ULPS
    assert float(torch.tanh(z32).abs().max()) <= 1.0


def _random_policy(gen: torch.Generator, in_dim: int, layer_norm: bool,
                   weight_scale: float = 4.0) -> nn.Sequential:
    """float32 layers after a deployed-style normaliser whose means float32 cannot represent,
    one input of variance about 0 (scale 1e4), large weights (by default)."""
    mean = torch.randn(in_dim, generator=gen, dtype=torch.float64) * 300 + 0.1
    var = torch.rand(in_dim, generator=gen, dtype=torch.float64) + 0.01
    var[0] = 0.0
    layers: list[nn.Module] = [Affine.normaliser(mean, var, 1e-8, torch.float32),
                               Clamp(-5.0, 5.0)]
    width = in_dim
    for hidden in (16, 16):
        layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden) if layer_norm else nn.Tanh(),
                   nn.ReLU()]
        width = hidden
    layers += [nn.Linear(width, 3), nn.Tanh()]
    net = nn.Sequential(*layers)
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * weight_scale)
    return net


@pytest.mark.parametrize("layer_norm", [False, True], ids=["tanh", "layernorm"])
@pytest.mark.parametrize("weight_scale", [4.0, 0.3], ids=["large", "small"])
def test_float32_outputs_stay_within_the_rounding_bound(layer_norm, weight_scale):
    gen = torch.Generator().manual_seed(3)
    for _ in range(10):
        net = _random_policy(gen, 5, layer_norm, weight_scale)
        exact_net = _as_float64(net)
        mean = net[0].centre
        low = mean - torch.rand(5, generator=gen, dtype=torch.float64) * 1e-3
        high = low + torch.rand(5, generator=gen, dtype=torch.float64) * 2e-3
        x = (low + (high - low) * torch.rand(4000, 5, generator=gen, dtype=torch.float64)).float()
        with torch.no_grad():
            difference = (net(x).double() - exact_net(x.double())).abs()
        bound = rounding_bound(net, low[None], high[None])[0]
        assert (difference <= bound).all()
        if weight_scale < 1 and not layer_norm:  # (a LayerNorm whose box holds nearly
            assert float(bound.max()) < 1e-3       # constant vectors amplifies without limit)


def _as_float64(net: nn.Sequential) -> nn.Sequential:
    import copy

    exact = copy.deepcopy(net).double()
    return exact


def test_the_rebuilt_policy_is_the_agents_bit_for_bit_where_var_is_zero():
    torch.manual_seed(0)
    actor = TanhGaussianActor(4, 2, [8, 8])
    obs_norm = RunningNormalizer(4)
    obs_norm.update(torch.tensor([[1000.1, 0.3, -7.7, 2.0]] * 8))  # var exactly 0
    tensors = {f"algo.actor.{k}": v for k, v in actor.state_dict().items()}
    tensors |= {f"algo.obs_normalizer.{k}": v for k, v in obs_norm.state_dict().items()}
    policy = policy_from_tensors(tensors)
    x = torch.tensor([[1000.1, 0.3, -7.7, 2.0]]) + torch.randn(64, 4) * 1e-3
    with torch.no_grad():
        assert torch.equal(policy(x), actor.deterministic(obs_norm(x)))


def _saturated_actor(bias: float) -> nn.Sequential:
    linear = nn.Linear(2, 1)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[0.5, -0.5]]))
        linear.bias.fill_(bias)
    return nn.Sequential(linear, nn.Tanh())


def test_saturated_bounds_are_proved_before_the_tanh():
    low, high = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    net = _saturated_actor(12.0)  # pre-tanh in [11.5, 12.5]: float32 tanh is 1.0 there
    result = verify_action_property(net, low, high, action_low=torch.tensor([-1.0]),
                                    action_high=torch.tensor([1.0]))
    assert result.status == "proved" and result.details["method"] == "tanh range"
    near = verify_action_property(_saturated_actor(5.0), low, high,
                                  action_high=torch.tensor([math.tanh(5.6)]))
    assert near.status == "proved", near.details  # z <= 5.5 < atanh(bound) = 5.6
    assert near.details["method"] == "crown+bab before tanh"
    over = verify_action_property(_saturated_actor(5.0), low, high,
                                  action_high=torch.tensor([math.tanh(5.4)]))
    assert over.status == "falsified"
    with torch.no_grad():
        assert float(_saturated_actor(5.0)(torch.tensor(over.counterexample).float())) > \
            math.tanh(5.4)


def test_min_variance_by_hand():
    lo = torch.tensor([[0.0, 2.0], [0.0, 0.5], [1.0, 1.0]], dtype=torch.float64)
    hi = torch.tensor([[1.0, 3.0], [1.0, 2.0], [1.0, 1.0]], dtype=torch.float64)
    # [0,1] and [2,3]: closest points 1 and 2 -> var 0.25; overlapping boxes -> 0
    assert min_variance(lo, hi).tolist() == pytest.approx([0.25, 0.0, 0.0], abs=1e-12)
    three = min_variance(torch.tensor([[0.0, 0.0, 3.0]], dtype=torch.float64),
                         torch.tensor([[0.0, 0.0, 3.0]], dtype=torch.float64))
    assert float(three) == pytest.approx(2.0)  # var of (0, 0, 3)


def test_layernorm_actor_proves_a_property_sampling_shows_with_margin():
    torch.manual_seed(1)
    actor = TanhGaussianActor(6, 2, [32, 32], layer_norm=True)
    net = actor.deterministic_net()
    centre = torch.randn(6, dtype=torch.float64)
    low, high = centre - 0.02, centre + 0.02
    x = low + (high - low) * torch.rand(20_000, 6, dtype=torch.float64)
    with torch.no_grad():
        outputs = net(x.float()).double()
    result = verify_action_property(net, low, high, action_low=outputs.min(0).values - 1e-2,
                                    action_high=outputs.max(0).values + 1e-2, max_seconds=2.0)
    assert result.status == "proved", result.details
