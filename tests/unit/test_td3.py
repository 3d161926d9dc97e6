"""TD3: the clipped double-Q target and target smoothing by hand, delayed actor/target
updates, acting modes, the contract check, state round trip, and learning PointReach."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos.base import check_algorithm
from agentic_rl.algos.td3 import TD3, TD3Config, smoothed, td3_target

SPACES = {"obs_dim": 3, "goal_dim": 2, "act_dim": 2, "action_low": -2 * np.ones(2, np.float32),
          "action_high": 2 * np.ones(2, np.float32)}


def make_td3(**overrides) -> TD3:
    return TD3(TD3Config(batch_size=4, hidden_sizes=[8, 8], **overrides), SPACES)


def batch_of(size: int = 4) -> dict[str, torch.Tensor]:
    return {"obs": torch.randn(size, 3), "action": torch.rand(size, 2) * 2 - 1,
            "reward": -torch.ones(size), "next_obs": torch.randn(size, 3),
            "terminated": torch.zeros(size), "desired_goal": torch.randn(size, 2)}


def test_target_takes_the_smaller_q_and_stops_at_terminal_states():
    next_q = torch.tensor([[1.0, 5.0, -2.0], [3.0, 4.0, 0.0]])
    target = td3_target(torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 1.0]), next_q, 0.5)
    torch.testing.assert_close(target, torch.tensor([1.0 + 0.5 * 1.0, 0.5 * 4.0, 2.0]))


def test_smoothing_noise_is_clipped_and_actions_stay_in_the_box():
    action = torch.tensor([[0.0, 0.95]] * 1000)
    out = smoothed(action, std=10.0, clip=0.1, generator=torch.Generator().manual_seed(0))
    assert (out[:, 0].abs() <= 0.1 + 1e-6).all() and (out[:, 1] <= 1.0).all()
    assert (out[:, 1] >= 0.85 - 1e-6).all()
    assert torch.equal(smoothed(action, 0.0, 0.5, torch.Generator()), action)


def test_actor_and_targets_move_only_every_policy_delay_updates():
    algo = make_td3(policy_delay=2)
    actor = [p.clone() for p in algo.actor.parameters()]
    target = [p.clone() for p in algo.target_critic.parameters()]
    first = algo.update(batch_of())
    assert "losses/actor_loss" not in first
    assert all(torch.equal(a, b) for a, b in zip(actor, algo.actor.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(target, algo.target_critic.parameters()))
    second = algo.update(batch_of())
    assert "losses/actor_loss" in second
    assert not all(torch.equal(a, b) for a, b in zip(actor, algo.actor.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(target, algo.target_critic.parameters()))


def test_modes_contract_and_state_round_trip():
    algo = make_td3()
    check_algorithm(algo)
    obs = {"observation": torch.randn(5, 3), "desired_goal": torch.randn(5, 2)}
    for mode in ("explore", "deterministic", "random"):
        action, _, extras = algo.act(obs, None, mode)
        assert action.shape == (5, 2) and (action.abs() <= 2).all()
        torch.testing.assert_close(algo.env_to_unit(action), extras["unit_action"])
    with pytest.raises(ValueError, match="mode"):
        algo.act(obs, None, True)
    algo.update(batch_of())
    algo.update(batch_of())
    clone = make_td3()
    clone.load_state_dict(algo.state_dict())
    torch.testing.assert_close(clone.act(obs, None, "deterministic")[0],
                               algo.act(obs, None, "deterministic")[0])
    assert clone.num_updates == 2
