"""PPO: GAE with truncation, clipped losses against hand computations, masks, learning."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pydantic import ValidationError

from agentic_rl.algos.hgpo_losses import ppo_policy_loss, value_loss
from agentic_rl.algos.ppo import PPO, PPOConfig
from agentic_rl.data.rollout import RolloutBuffer, gae
from agentic_rl.nets.categorical import MaskedCategoricalActor

torch.set_num_threads(1)


def test_gae_bootstraps_on_truncation_not_termination():
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    next_values = torch.tensor([[1.0], [4.0], [2.0]])  # step 1 truncated: V(final obs) = 4
    terminated = torch.tensor([[False], [False], [True]])
    dones = torch.tensor([[False], [True], [True]])
    adv, ret = gae(rewards, values, next_values, terminated, dones, gamma=0.9, lam=0.8)
    # delta = [1 + .9*1 - .5, 2 + .9*4 - 1, 3 - 1.5] = [1.4, 4.6, 1.5]
    expected = torch.tensor([[1.4 + 0.9 * 0.8 * 4.6], [4.6], [1.5]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


def test_gae_per_step_discount_tensor():
    rewards, values = torch.tensor([1.0, 1.0]), torch.zeros(2)
    next_values, no = torch.tensor([0.0, 10.0]), torch.zeros(2, dtype=torch.bool)
    adv, _ = gae(rewards, values, next_values, no, no, torch.tensor([0.5, 0.25]), lam=1.0)
    torch.testing.assert_close(adv, torch.tensor([1.0 + 0.5 * 3.5, 1.0 + 2.5]))


def test_ppo_policy_loss_matches_hand_computation():
    log_prob = torch.log(torch.tensor([1.5, 0.5, 1.5]))
    old = torch.zeros(3)
    adv = torch.tensor([1.0, 1.0, -1.0])
    loss, kl, clip_frac = ppo_policy_loss(log_prob, old, adv, clip_range=0.2)
    # min(r A, clip(r) A): [min(1.5, 1.2), min(.5, .8), min(-1.5, -1.2)] = [1.2, .5, -1.5]
    torch.testing.assert_close(loss, torch.tensor(-(1.2 + 0.5 - 1.5) / 3))
    expected_kl = ((0.5 - math.log(1.5)) * 2 + (-0.5 - math.log(0.5))) / 3
    assert kl.item() == pytest.approx(expected_kl, rel=1e-5)
    assert clip_frac.item() == 1.0


def test_ppo_policy_loss_stays_finite_far_outside_the_policy():
    """log r = 100 would overflow float32; clamped at MAX_LOG_RATIO = 20 the loss is finite,
    and the clamped sample (A < 0, so the unclipped term is chosen) passes no gradient."""
    log_prob = torch.tensor([100.0, math.log(1.1)], requires_grad=True)
    loss, kl, _ = ppo_policy_loss(log_prob, torch.zeros(2), torch.tensor([-1.0, 1.0]), 0.2)
    torch.testing.assert_close(loss, torch.tensor((math.exp(20.0) - 1.1) / 2))
    assert torch.isfinite(kl)
    loss.backward()
    torch.testing.assert_close(log_prob.grad, torch.tensor([0.0, -1.1 / 2]))


def test_value_loss_plain_and_clipped():
    values, returns, old = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 0.0]), torch.tensor([1.0, 2.5])
    assert value_loss(values, returns).item() == pytest.approx(0.5 * (1 + 9) / 2)
    # clipped: [1 + clip(0) = 1 -> 1, 2.5 + clip(.5, -.2, .2) = 2.7 -> 7.29]; max with [1, 9]
    assert value_loss(values, returns, old, 0.2).item() == pytest.approx(0.5 * (1 + 9) / 2)
    values = torch.tensor([1.0, 1.0])
    # second: (1-0)^2 = 1 vs (2.5 - .2 - 0)^2 = 5.29 -> max 5.29
    assert value_loss(values, returns, old, 0.2).item() == pytest.approx(0.5 * (1 + 5.29) / 2)


def test_masked_categorical_never_samples_forbidden_actions():
    actor = MaskedCategoricalActor(3, 4, [8])
    x = torch.randn(500, 3)
    mask = torch.tensor([[True, False, True, False]]).expand(500, 4)
    action, log_prob = actor.sample(x, mask, torch.Generator().manual_seed(0))
    assert set(action.tolist()) <= {0, 2}
    lp, entropy = actor.evaluate(x, action, mask)
    torch.testing.assert_close(lp, log_prob)
    assert (entropy <= math.log(2) + 1e-5).all() and (entropy > 0).all()
    with pytest.raises(ValueError, match="forbids every action"):
        actor.sample(x[:1], torch.zeros(1, 4, dtype=torch.bool))


def test_config_rejects_unknown_keys():
    with pytest.raises(ValidationError, match="clip_rnage"):
        PPOConfig(clip_rnage=0.1)


def test_rollout_buffer_keeps_terminated_and_truncated_apart():
    buffer = RolloutBuffer(2)
    obs = {"observation": torch.zeros(3, 2)}
    for term, trunc in [([1, 0, 0], [0, 1, 0]), ([0, 0, 0], [0, 0, 1])]:
        buffer.add(obs, obs, torch.zeros(3, dtype=torch.long), torch.ones(3),
                   torch.tensor(term).bool(), torch.tensor(trunc).bool(), {"value": torch.ones(3)})
    rollout = buffer.get()
    assert rollout.terminated.tolist() == [[True, False, False], [False, False, False]]
    assert rollout.dones.tolist() == [[True, True, False], [False, False, True]]
    with pytest.raises(RuntimeError, match="full"):
        buffer.add(obs, obs, torch.zeros(3), torch.ones(3), torch.zeros(3), torch.zeros(3), {})


def test_continuous_ppo_update_reports_metrics_and_round_trips():
    obs_space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,)), "desired_goal": spaces.Box(-1, 1, (2,))})
    for head in ["tanh", "gaussian"]:
        algo = PPO(PPOConfig(continuous_head=head, minibatch_size=8), obs_space, spaces.Box(-2, 2, (2,)))
        buffer = RolloutBuffer(4)
        for _ in range(4):
            obs = {"observation": torch.randn(4, 3), "desired_goal": torch.randn(4, 2)}
            action, _, extras = algo.act(obs, None, "explore")
            assert (action.abs() <= 2).all()
            buffer.add(obs, obs, action, torch.randn(4), torch.zeros(4, dtype=torch.bool),
                       torch.zeros(4, dtype=torch.bool), extras)
        metrics = algo.update(buffer.get())
        assert {"losses/policy_loss", "losses/value_loss", "losses/entropy", "train/approx_kl",
                "train/clip_fraction"} <= set(metrics)
        assert all(np.isfinite(v) for v in metrics.values())
        clone = PPO(PPOConfig(continuous_head=head), obs_space, spaces.Box(-2, 2, (2,)), seed=5)
        clone.load_state_dict(algo.state_dict())
        probe = {"observation": torch.randn(2, 3), "desired_goal": torch.randn(2, 2)}
        torch.testing.assert_close(clone.act(probe, None, "deterministic")[0],
                                   algo.act(probe, None, "deterministic")[0])


def test_scheduled_entropy_coefficient_follows_the_learners_env_steps():
    """ent_coef 1 -> 0 over 32 env steps: the first update (step 0) equals a constant 1, the
    second (step 16, two envs x 8 steps seen) a constant 0.5, and the counter is saved."""
    obs_space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,)),
                             "desired_goal": spaces.Box(-1, 1, (2,))})
    schedule = {"start": 1.0, "end": 0.0, "steps": 32}

    def rollout(seed: int):
        buffer, generator = RolloutBuffer(8), torch.Generator().manual_seed(seed)
        for _ in range(8):
            obs = {"observation": torch.rand(2, 3, generator=generator),
                   "desired_goal": torch.rand(2, 2, generator=generator)}
            extras = {"log_prob": torch.full((2,), -math.log(4)), "value": torch.zeros(2),
                      "unit_action": torch.zeros(2, dtype=torch.long)}
            buffer.add(obs, obs, torch.randint(4, (2,), generator=generator),
                       torch.rand(2, generator=generator), torch.zeros(2, dtype=torch.bool),
                       torch.zeros(2, dtype=torch.bool), extras)
        return buffer.get()

    def learner(ent_coef):
        return PPO(PPOConfig(ent_coef=ent_coef, minibatch_size=8), obs_space, spaces.Discrete(4))

    scheduled, first, second = learner(schedule), learner(1.0), learner(0.5)
    scheduled.update(rollout(0))
    first.update(rollout(0))
    assert scheduled.env_steps == 16
    second.load_state_dict(first.state_dict())
    scheduled.update(rollout(1))
    second.update(rollout(1))
    for name in ("policy", "value"):
        a, b = getattr(scheduled, name).state_dict(), getattr(second, name).state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    assert learner(schedule).state_dict()["env_steps"] == 0
    with pytest.raises(ValidationError, match="ent_coef"):
        PPOConfig(ent_coef={"start": 0.0, "end": -0.1, "steps": 5})
