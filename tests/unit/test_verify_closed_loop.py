"""Closed-loop reachability: sound one-step boxes and FetchReach workspace proofs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.closed_loop import step_boxes, verify_closed_loop
from agentic_rl.verify.layers import normalised_policy
from agentic_rl.verify.spec import PropertySet
from agentic_rl.verify.step_model import AffineStepModel, fetch_reach_step_model

torch.set_num_threads(1)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["relu", "tanh", "layernorm"]))
def test_step_boxes_contain_every_sampled_next_state(seed, kind):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    act = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "layernorm": nn.LayerNorm(6)}[kind]
    net = nn.Sequential(nn.Linear(3, 6), act, nn.Linear(6, 2), nn.Tanh()).double()
    model = AffineStepModel(np.array([0, 2]), rng.normal(size=(2, 3)), rng.normal(size=(2, 2)),
                            rng.normal(size=2))
    low = torch.as_tensor(rng.normal(size=3))
    high = low + torch.as_tensor(rng.uniform(0, 1, size=3))
    next_lo, next_hi = step_boxes(net, model, low[None], high[None])
    states = (low + (high - low) * torch.rand(10_000, 3, dtype=torch.float64)).numpy()
    with torch.no_grad():
        actions = net(torch.as_tensor(states)).numpy()
    nxt = model.step(states, actions)
    assert (nxt >= next_lo.numpy() - 1e-9).all() and (nxt <= next_hi.numpy() + 1e-9).all()
    assert torch.equal(next_lo[0, 1], low[1]) and torch.equal(next_hi[0, 1], high[1])


def fetch_policy(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    actor = TanhGaussianActor(13, 4, [32, 32])
    mean = torch.tensor([1.34, 0.75, 0.53] + [0.0] * 7 + [1.34, 0.75, 0.53], dtype=torch.float64)
    return normalised_policy(actor.deterministic_net(), mean, torch.full((13,), 0.01))


def test_fetch_workspace_proved_when_reachable_set_fits():
    policy, model = fetch_policy(), fetch_reach_step_model(13, 4)
    centre = np.array([1.34, 0.75, 0.53] + [0.0] * 7 + [1.30, 0.80, 0.50])
    props = PropertySet.model_validate({"parts": {"grip_pos": [0, 3]}, "properties": [
        {"name": "ws", "kind": "state_box", "part": "grip_pos",
         "low": [1.1, 0.5, 0.3], "high": [1.6, 1.0, 0.8]}]})
    # 4 steps of at most 0.05 m from a +-0.01 box stay >= 0.02 m inside: provable
    result = verify_closed_loop(policy, model, centre - 0.01, centre + 0.01, props.properties[0],
                                horizon=4, parts=props.parts)
    assert result.status == "proved"
    assert result.details["unpredicted_entries_fixed_to_initial_box"] == list(range(3, 13))


def test_fetch_floor_violation_is_falsified_with_model_trajectory():
    policy, model = fetch_policy(), fetch_reach_step_model(13, 4)
    centre = np.array([1.34, 0.75, 0.53] + [0.0] * 7 + [1.30, 0.80, 0.50])
    with torch.no_grad():
        action = policy(torch.as_tensor(centre[None], dtype=torch.float32))[0].numpy()
    # put a "floor" just beyond where the centre's first action takes the gripper along z
    direction = np.sign(action[2]) or 1.0
    floor = centre[2] + direction * 0.5 * 0.05 * abs(action[2])
    halfspace = {"name": "floor", "kind": "state_halfspace", "part": "grip_pos",
                 "a": [0.0, 0.0, float(direction)], "b": float(direction * floor)}
    props = PropertySet.model_validate({"parts": {"grip_pos": [0, 3]}, "properties": [halfspace]})
    result = verify_closed_loop(policy, model, centre - 1e-4, centre + 1e-4, props.properties[0],
                                horizon=3, parts=props.parts)
    assert result.status == "falsified"
    trajectory = np.array(result.details["trajectory"])
    assert trajectory[-1, :3] @ np.array(halfspace["a"]) > halfspace["b"]


def test_initial_box_is_split_when_one_box_is_too_coarse():
    torch.manual_seed(6)
    net = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2), nn.Tanh())
    model = AffineStepModel(np.arange(2), np.eye(2), 0.5 * np.eye(2), np.zeros(2))
    low, high = -torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    box_lo, box_hi = (b[0].numpy() for b in step_boxes(net, model, low[None], high[None]))
    states = (low + 2 * torch.rand(20_000, 2, dtype=torch.float64)).numpy()
    with torch.no_grad():
        reach = model.step(states, net(torch.as_tensor(states, dtype=torch.float32)).double().numpy())
    # invariant: 30% of the way from the sampled reach to the one-box bound (and holding x_0)
    inv_hi = np.maximum(reach.max(0) + 0.3 * (box_hi - reach.max(0)), 1.0)
    inv_lo = np.minimum(reach.min(0) - 0.3 * (reach.min(0) - box_lo), -1.0)
    assert (box_hi > inv_hi).any() or (box_lo < inv_lo).any()   # one box cannot prove it
    result = verify_closed_loop(net, model, low, high, (inv_lo, inv_hi), horizon=1)
    assert result.status == "proved"
    assert result.details["boxes"] > 1


def test_model_and_policy_sizes_must_agree():
    with pytest.raises(ValueError, match="policy takes 13 inputs but the step model's state has 10"):
        verify_closed_loop(fetch_policy(), fetch_reach_step_model(10, 4), np.zeros(10),
                           np.zeros(10), (np.full(10, -1.0), np.full(10, 1.0)), horizon=2)


def test_point_reach_declares_its_exact_dynamics():
    from agentic_rl.envs.point import PointReachEnv
    from agentic_rl.verify.step_model import declared_step_model

    model = declared_step_model("agentic_rl/PointReach-v0", 4, 2, {"step_size": 0.3})
    env = PointReachEnv(step_size=0.3)
    rng = np.random.default_rng(0)
    for _ in range(200):
        obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
        env.position = rng.uniform(-1, 1, 2).astype(np.float32)  # walls included
        state = np.concatenate([env.position, obs["desired_goal"]])
        action = rng.uniform(-1, 1, 2).astype(np.float32)
        reached = env.step(action)[0]["observation"]
        predicted = model.step(state[None], action[None])[0, :2]
        assert np.all(np.abs(reached - predicted) <= model.error)


def test_a_clipped_model_proves_the_walls_hold():
    from agentic_rl.verify.step_model import point_reach_step_model

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Tanh())
    model = point_reach_step_model(4, 2)
    low = torch.tensor([0.8, 0.8, -0.5, -0.5], dtype=torch.float64)
    high = torch.tensor([1.0, 1.0, 0.5, 0.5], dtype=torch.float64)
    inside = (np.array([-1.0, -1.0, -9.0, -9.0]), np.array([1.0, 1.0, 9.0, 9.0]))
    result = verify_closed_loop(net, model, low, high, inside, horizon=5)
    assert result.status == "proved"  # the env clips the position: never past a wall
    corner = (np.array([-9.0, -9.0, -9.0, -9.0]), np.array([0.79, 9.0, 9.0, 9.0]))
    assert verify_closed_loop(net, model, low, high, corner, horizon=5).status == "falsified"
