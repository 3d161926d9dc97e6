"""Each SAC/OPD loss against a hand computation on small tensors."""

import math

import pytest
import torch

from agentic_rl.algos import losses


def test_soft_q_target_hand_computed():
    reward = torch.tensor([1.0, -1.0])
    terminated = torch.tensor([0.0, 1.0])
    next_q = torch.tensor([[2.0, 5.0], [3.0, 4.0]])  # [num_q=2, B=2]
    next_log_prob = torch.tensor([-1.0, 0.5])
    target = losses.soft_q_target(reward, terminated, next_q, next_log_prob, 0.1, 0.9)
    # sample 0: 1 + 0.9 * (min(2, 3) - 0.1 * -1) = 1 + 0.9 * 2.1 = 2.89; sample 1 terminal: -1
    assert torch.allclose(target, torch.tensor([2.89, -1.0]))


def test_critic_loss_sums_heads_of_mean_squared_error():
    q = torch.tensor([[1.0, 2.0], [0.0, 4.0]])
    target = torch.tensor([2.0, 2.0])
    # head 0: ((1-2)^2 + 0) / 2 = 0.5; head 1: (4 + 4) / 2 = 4; total 0.5 * 4.5
    assert losses.critic_loss(q, target).item() == pytest.approx(2.25)


def test_sac_actor_loss():
    q_pi = torch.tensor([[1.0, -2.0], [0.5, -1.0]])
    log_prob = torch.tensor([-1.0, 2.0])
    # mean(0.2 * -1 - 0.5, 0.2 * 2 - (-2)) = mean(-0.7, 2.4) = 0.85
    assert losses.sac_actor_loss(q_pi, log_prob, 0.2).item() == pytest.approx(0.85)


def test_temperature_loss_and_its_gradient():
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    log_prob = torch.tensor([-1.0, -3.0], requires_grad=True)
    loss = losses.temperature_loss(log_alpha, log_prob, target_entropy=-2.0)
    # -log(0.5) * mean(-1 - 2, -3 - 2) = -log(0.5) * -4
    assert loss.item() == pytest.approx(4 * math.log(0.5))
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(4.0)
    assert log_prob.grad is None  # no gradient flows to the policy


def test_distill_mse_with_and_without_mask():
    policy = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    proto = torch.tensor([[1.0, 0.0], [1.0, -1.0]])
    # per-sample means: (1 + 0) / 2 = 0.5 and (0 + 4) / 2 = 2
    assert losses.distill_mse_loss(policy, proto).item() == pytest.approx(1.25)
    assert losses.distill_mse_loss(policy, proto, torch.tensor([0.0, 1.0])).item() == 2.0
    assert losses.distill_mse_loss(policy, proto, torch.zeros(2)).item() == 0.0


def test_distill_nll_and_q_filter():
    log_prob = torch.tensor([-1.0, -3.0, -5.0])
    assert losses.distill_nll_loss(log_prob).item() == pytest.approx(3.0)
    q_proto = torch.tensor([[1.0, 0.0, 2.0], [1.5, 0.0, 0.1]])
    q_pi = torch.tensor([[0.5, 1.0, 0.2], [0.9, 1.0, 0.2]])
    mask = losses.q_filter_mask(q_proto, q_pi)  # min: (1 > 0.5), (0 > 1), (0.1 > 0.2)
    assert mask.tolist() == [1.0, 0.0, 0.0]
    assert losses.distill_nll_loss(log_prob, mask).item() == pytest.approx(1.0)


def test_schedules():
    assert losses.scheduled_value(0.2, 0.05, 100, "linear", 50) == pytest.approx(0.125)
    assert losses.scheduled_value(0.2, 0.05, 100, "linear", 500) == pytest.approx(0.05)
    assert losses.scheduled_value(20.0, 0.2, 100, "exponential", 50) == pytest.approx(2.0)
    assert losses.scheduled_value(20.0, 0.2, 100, "exponential", 0) == pytest.approx(20.0)
    with pytest.raises(ValueError):
        losses.scheduled_value(1, 0, 1, "cosine", 0)
