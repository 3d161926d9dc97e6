"""Actor log-probabilities, ensemble critics and the running normaliser."""

import numpy as np
import torch

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.critics import EnsembleQ
from agentic_rl.nets.normalizer import RunningNormalizer


def test_sample_log_prob_matches_log_prob_of_the_action():
    torch.manual_seed(0)
    actor = TanhGaussianActor(5, 3, [16, 16])
    x = torch.randn(64, 5)
    action, log_prob, _, _ = actor.sample(x, torch.Generator().manual_seed(1))
    assert torch.allclose(actor.log_prob(x, action), log_prob, atol=2e-3)


def test_tanh_gaussian_log_prob_against_change_of_variables():
    actor = TanhGaussianActor(1, 1, [4])
    x = torch.zeros(1, 1)
    mean, log_std = actor(x)
    a = torch.tensor([[0.3]])
    u = torch.atanh(a)
    normal = torch.distributions.Normal(mean, log_std.exp())
    expected = normal.log_prob(u) - torch.log(1 - a.pow(2))
    assert torch.allclose(actor.log_prob(x, a), expected.sum(-1), atol=1e-5)


def test_ensemble_q_members_are_independent_linear_stacks():
    torch.manual_seed(0)
    critic = EnsembleQ(3, 2, [8], num_q=2)
    obs, act = torch.randn(4, 3), torch.randn(4, 2)
    q = critic(obs, act)
    assert q.shape == (2, 4)
    x = torch.cat([obs, act], -1)
    first, second = critic.net[0], critic.net[2]
    hidden = torch.relu(x @ first.weight[1] + first.bias[1])
    assert torch.allclose(q[1], (hidden @ second.weight[1] + second.bias[1]).squeeze(-1))


def test_normalizer_matches_numpy_statistics_and_clips():
    data = np.random.default_rng(0).normal(3.0, 2.0, (1000, 4))
    norm = RunningNormalizer(4, clip=5.0)
    for chunk in np.array_split(data, 7):
        norm.update(torch.as_tensor(chunk))
    assert np.allclose(norm.mean.numpy(), data.mean(0))
    assert np.allclose(norm.var.numpy(), data.var(0))
    out = norm(torch.tensor([[3.0, 3.0, 3.0, 1e6]]))
    assert out[0, :3].abs().max() < 0.1 and out[0, 3] == 5.0


def test_sample_action_is_samples_action_from_the_same_noise():
    torch.manual_seed(0)
    actor = TanhGaussianActor(5, 3, [16])
    x = torch.randn(7, 5)
    first, second = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert torch.equal(actor.sample_action(x, first), actor.sample(x, second)[0])
    assert torch.equal(first.get_state(), second.get_state())
