"""Rebuilding the executed policy from checkpoint tensors, normaliser included."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.normalizer import RunningNormalizer
from agentic_rl.verify.bounds import crown_bounds, interval_bounds
from agentic_rl.verify.policy import policy_from_tensors

torch.set_num_threads(1)


def checkpoint_tensors(goal_enabled: bool = True) -> tuple[dict, TanhGaussianActor,
                                                            RunningNormalizer, RunningNormalizer]:
    torch.manual_seed(0)
    actor = TanhGaussianActor(13, 4, [16, 16])
    obs_norm, goal_norm = RunningNormalizer(10), RunningNormalizer(3, enabled=goal_enabled)
    obs_norm.update(torch.randn(64, 10) * 0.3 + 1.0)
    goal_norm.update(torch.randn(64, 3) * 0.1 + 0.5)
    tensors = {}
    for name, module in {"actor": actor, "obs_normalizer": obs_norm,
                         "goal_normalizer": goal_norm}.items():
        tensors.update({f"algo.{name}.{k}": v for k, v in module.state_dict().items()})
    return tensors, actor, obs_norm, goal_norm


def executed(actor, obs_norm, goal_norm, x: torch.Tensor) -> torch.Tensor:
    """What SAC.act(deterministic=True) computes on raw [obs, goal]."""
    return actor.deterministic(torch.cat([obs_norm(x[:, :10]), goal_norm(x[:, 10:])], -1))


def test_rebuilt_policy_matches_the_executed_one_including_clipping():
    tensors, actor, obs_norm, goal_norm = checkpoint_tensors()
    policy = policy_from_tensors(tensors)
    x = torch.randn(256, 13) * 3.0  # large enough that the +-5 clip is active
    torch.testing.assert_close(policy(x), executed(actor, obs_norm, goal_norm, x),
                               atol=1e-5, rtol=1e-5)
    # and the bounds hold for the executed policy on a box of raw states
    low, high = x[0] - 0.05, x[0] + 0.05
    samples = low + (high - low) * torch.rand(2000, 13)
    out = executed(actor, obs_norm, goal_norm, samples).double()
    for lo, hi in (interval_bounds(policy, low, high), crown_bounds(policy, low, high)):
        assert (out >= lo - 1e-5).all() and (out <= hi + 1e-5).all()


def test_disabled_goal_normaliser_and_env_action_box():
    tensors, actor, obs_norm, goal_norm = checkpoint_tensors(goal_enabled=False)
    policy = policy_from_tensors(tensors, normalize=(True, False),
                                 action_low=[-2.0] * 4, action_high=[2.0] * 4)
    x = torch.randn(32, 13) * 8.0  # goal entries beyond 5 must not be clipped
    torch.testing.assert_close(policy(x), 2.0 * executed(actor, obs_norm, goal_norm, x),
                               atol=1e-5, rtol=1e-5)


def test_size_mismatch_and_missing_keys_are_explained():
    tensors, *_ = checkpoint_tensors()
    del tensors["algo.goal_normalizer.mean"]
    with pytest.raises(ValueError, match="cover 10 inputs but the actor takes 13"):
        policy_from_tensors(tensors)
    with pytest.raises(ValueError, match="is the key prefix right"):
        policy_from_tensors(tensors, prefix="model.")


def test_a_td3_actor_is_rebuilt_as_it_acts():
    import numpy as np

    from agentic_rl.algos.td3 import TD3, TD3Config

    spaces = {"obs_dim": 10, "goal_dim": 3, "act_dim": 4,
              "action_low": -np.ones(4, np.float32), "action_high": np.ones(4, np.float32)}
    torch.manual_seed(0)
    td3 = TD3(TD3Config(hidden_sizes=[16, 16]), spaces)
    td3.observe({"observation": torch.randn(64, 10) * 0.3 + 1.0,
                 "desired_goal": torch.randn(64, 3) * 0.1 + 0.5,
                 "achieved_goal": torch.randn(64, 3) * 0.1 + 0.5})
    tensors = {f"algo.{name}.{k}": v for name, module in td3.modules().items()
               for k, v in module.state_dict().items()}
    policy = policy_from_tensors(tensors)
    x = torch.randn(64, 13) * 3.0
    acted, _, _ = td3.act({"observation": x[:, :10], "desired_goal": x[:, 10:]}, None,
                          "deterministic")
    torch.testing.assert_close(policy(x).float(), acted, atol=1e-5, rtol=1e-5)
