"""Proofs and counterexamples: branch-and-bound, search, closed loop, property files."""

from __future__ import annotations

import json

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.bounds import crown_bounds, interval_bounds, normalised_policy
from agentic_rl.verify.layers import Clamp
from agentic_rl.verify.closed_loop import verify_closed_loop
from agentic_rl.verify.prove import branch_and_bound, verify_action_property
from agentic_rl.verify.runner import format_results, results_report, verify_properties
from agentic_rl.verify.search import search_counterexample
from agentic_rl.verify.spec import PropertySet
from agentic_rl.verify.step_model import AffineStepModel, fetch_reach_step_model

torch.set_num_threads(1)


def abs_dip_net() -> nn.Sequential:
    """y = relu(|x| - 0.5) + relu(0.5 - |x|) = ||x| - 0.5| on [-1, 1]: true maximum 0.5."""
    net = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0], [-1.0]]))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[1.0, 1.0], [-1.0, -1.0]]))
        net[2].bias.copy_(torch.tensor([-0.5, 0.5]))
        net[4].weight.copy_(torch.tensor([[1.0, 1.0]]))
        net[4].bias.zero_()
    return net


def loose_net() -> nn.Sequential:
    """A fixed 1-2-2-1 ReLU net whose maximum on [-1, 1] is 7 (at x = -1) but whose single-box
    bounds are loose: IBP gives 11 and CROWN 10.55."""
    net = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[-2.0], [-2.0]]))
        net[0].bias.copy_(torch.tensor([0.5, -0.5]))
        net[2].weight.copy_(torch.tensor([[2.0, -1.0], [-1.0, -2.0]]))
        net[2].bias.copy_(torch.tensor([0.0, 1.0]))
        net[4].weight.copy_(torch.tensor([[2.0, 1.0]]))
        net[4].bias.zero_()
    return net


def test_branch_and_bound_proves_what_single_box_bounds_cannot():
    net, low, high = loose_net(), -torch.ones(1), torch.ones(1)
    with torch.no_grad():
        assert net(torch.linspace(-1, 1, 20_001)[:, None]).max().item() == 7.0
    assert interval_bounds(net, low, high)[1].item() == 11.0
    assert crown_bounds(net, low, high)[1].item() > 10.5
    spec, bias = torch.ones(1, 1), torch.tensor([7.5])
    result = branch_and_bound(net, low, high, spec, bias)
    assert result.status == "proved"
    assert result.details["boxes"] > 1
    assert verify_action_property(net, low, high, action_high=torch.tensor([7.5])).status == "proved"


def test_falsification_returns_a_real_counterexample():
    net = abs_dip_net()
    result = verify_action_property(net, -torch.ones(1), torch.ones(1),
                                    action_high=torch.tensor([0.45]),
                                    generator=torch.Generator().manual_seed(0))
    assert result.status == "falsified"
    x = torch.tensor(result.counterexample)
    assert -1.0 <= x.item() <= 1.0
    assert net(x[None]).item() > 0.45
    assert abs(result.output_at_counterexample[0] - net(x[None]).item()) < 1e-6
    json.dumps(result.to_dict())


def test_branch_and_bound_falsifies_at_a_box_centre_without_search():
    net = abs_dip_net()
    result = branch_and_bound(net, -torch.ones(1), torch.ones(1), torch.ones(1, 1),
                              torch.tensor([0.45]))
    assert result.status == "falsified"
    assert net(torch.tensor(result.counterexample)[None]).item() > 0.45


def test_budget_exhaustion_answers_unknown():
    net = abs_dip_net()  # the maximum 0.5 is attained: y <= 0.5 holds but never with margin
    result = branch_and_bound(net, -torch.ones(1), torch.ones(1), torch.ones(1, 1),
                              torch.tensor([0.5]), max_boxes=64)
    assert result.status == "unknown"
    # a sound bound on the worst violation: the true maximum margin is 0 (attained at |x| = 1)
    assert 0.0 <= result.details["violation_upper_bound"] <= result.details[
        "root_violation_upper_bound"]


def test_search_is_deterministic_given_generator():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    args = (net, -torch.ones(3), torch.ones(3), torch.tensor([[1.0, -1.0]]), torch.tensor([0.0]))
    first = search_counterexample(*args, generator=torch.Generator().manual_seed(5))
    second = search_counterexample(*args, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first.point, second.point) and first.margin == second.margin


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(-1.0, 1.0), st.sampled_from(["relu", "tanh"]))
def test_verify_never_proves_a_property_sampling_violates(seed, quantile, activation):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    act = nn.ReLU if activation == "relu" else nn.Tanh
    net = nn.Sequential(nn.Linear(2, 6), act(), nn.Linear(6, 6), act(), nn.Linear(6, 1))
    low = torch.randn(2, generator=gen)
    high = low + torch.rand(2, generator=gen)
    samples = low + (high - low) * torch.rand(10_000, 2, generator=gen)
    with torch.no_grad():
        outputs = net(samples)[:, 0]
    # thresholds from well below to a bit above the sampled maximum
    threshold = float(outputs.max() + quantile * (outputs.max() - outputs.min()))
    result = verify_action_property(net, low, high,
                                    action_high=torch.tensor([threshold], dtype=torch.float64),
                                    max_seconds=0.2, generator=gen)
    if (outputs > threshold).any():
        assert result.status != "proved"
    if result.status == "falsified":
        x = torch.tensor(result.counterexample, dtype=torch.float32)
        assert ((x >= low) & (x <= high)).all()
        assert net(x[None]).item() > threshold


def test_closed_loop_proves_and_falsifies_on_hand_model():
    # policy a = -x (pushes towards 0) through next = x + 0.5 a: the state halves every step
    net = nn.Sequential(nn.Linear(1, 1, bias=False))
    with torch.no_grad():
        net[0].weight.fill_(-1.0)
    model = AffineStepModel(np.arange(1), np.eye(1), 0.5 * np.eye(1), np.zeros(1))
    proved = verify_closed_loop(net, model, [0.5], [1.0], ([-1.0], [1.0]), horizon=10)
    assert proved.status == "proved"
    with torch.no_grad():
        net[0].weight.fill_(1.0)  # now it pushes away: x grows by 1.5x per step
    falsified = verify_closed_loop(net, model, [0.5], [1.0], ([-1.0], [1.0]), horizon=10)
    assert falsified.status == "falsified"
    trajectory = np.array(falsified.details["trajectory"])
    assert abs(trajectory[-1, 0]) > 1.0 and trajectory[0, 0] == falsified.counterexample[0]
    np.testing.assert_allclose(trajectory[1:], trajectory[:-1] * 1.5)


def test_verify_properties_on_fetch_actor():
    torch.manual_seed(0)
    actor = TanhGaussianActor(13, 4, [32, 32])
    policy = normalised_policy(actor.deterministic_net(), torch.zeros(13), torch.full((13,), 0.04))
    state = torch.zeros(13)
    state[:3] = torch.tensor([1.3, 0.75, 0.6])
    props = PropertySet.model_validate({"parts": {"grip_pos": [0, 3]}, "horizon": 3, "properties": [
        {"name": "limits", "kind": "action_box", "low": [-1] * 4, "high": [1] * 4},
        {"name": "ws", "kind": "state_box", "part": "grip_pos",
         "low": [1.0, 0.4, 0.3], "high": [1.6, 1.1, 0.9]},
        {"name": "noop", "kind": "forbidden_actions", "actions": [0]}]})
    results = verify_properties(policy, state - 0.01, state + 0.01, props,
                                model=fetch_reach_step_model(13, 4))
    statuses = {r.name: r.status for r in results}
    # tanh output is always in [-1, 1]; 3 steps of at most 0.05 m cannot leave a 0.3 m margin
    assert statuses == {"limits": "proved", "ws": "proved", "noop": "unknown"}
    json.dumps([r.to_dict() for r in results])


def test_report_and_table_name_every_property():
    net = abs_dip_net()
    props = PropertySet.model_validate({"properties": [
        {"name": "low_out", "kind": "action_box", "low": [-1.0], "high": [0.45]},
        {"name": "loose", "kind": "action_box", "low": [-1.0], "high": [0.6]}]})
    results = verify_properties(net, -torch.ones(1), torch.ones(1), props,
                                generator=torch.Generator().manual_seed(0))
    report = results_report(results)
    assert report["counts"] == {"proved": 1, "falsified": 1, "unknown": 0}
    json.dumps(report)
    table = format_results(results)
    assert "low_out" in table and "falsified" in table and "-> output" in table
    assert "loose" in table and "proved" in table


def test_output_exactly_at_the_bound_is_neither_proved_nor_falsified():
    net = nn.Sequential(nn.Linear(1, 1), Clamp(-0.5, 0.7)).double()
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.zero_()
    # y = clamp(x) reaches 0.7 exactly on x in [0.7, 2]: "y <= 0.7" holds with no margin
    result = verify_action_property(net, torch.zeros(1), 2 * torch.ones(1),
                                    action_high=torch.tensor([0.7], dtype=torch.float64),
                                    max_boxes=64, generator=torch.Generator().manual_seed(0))
    assert result.status == "unknown"


def test_point_and_thin_regions_answer_without_endless_splitting():
    net = abs_dip_net().double()  # y(0.25) = 0.25 exactly
    point = torch.tensor([0.25], dtype=torch.float64)
    spec = torch.ones(1, 1, dtype=torch.float64)
    far = branch_and_bound(net, point, point, spec, torch.tensor([0.3]), max_seconds=5.0)
    assert far.status == "proved" and far.seconds < 0.5
    over = branch_and_bound(net, point, point, spec, torch.tensor([0.2]), max_seconds=5.0)
    assert over.status == "falsified" and over.seconds < 0.5
    # exactly at the bound: within the rounding margin, so neither proved nor split forever
    tight = branch_and_bound(net, point, point, spec, torch.tensor([0.25]), max_seconds=5.0)
    assert tight.status == "unknown" and tight.seconds < 0.5 and "too thin" in tight.details["reason"]


def test_a_zero_width_side_is_never_split():
    net = nn.Sequential(nn.Linear(2, 1)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 1.0]]))
        net[0].bias.zero_()
    low = torch.tensor([-1.0, 0.5], dtype=torch.float64)  # the second side is a point
    high = torch.tensor([1.0, 0.5], dtype=torch.float64)
    result = branch_and_bound(net, low, high, torch.ones(1, 1, dtype=torch.float64),
                              torch.tensor([1.6]), max_seconds=5.0)
    assert result.status == "proved"  # max 1.5
