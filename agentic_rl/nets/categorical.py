"""Policy and value heads for on-policy learners (PPO, HGPO's levels).

Every policy head has the same three methods so PPO and HGPO do not branch on the action type:
``sample(x, mask, generator) -> (action, log_prob)``, ``evaluate(x, action, mask) ->
(log_prob, entropy)`` and ``mode(x, mask) -> action``. Discrete actions are ``[B]`` int64,
continuous ones ``[B, act_dim]`` in the policy's own units ([-1, 1] for the tanh head).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor, gaussian_log_prob, tanh_log_det_jacobian
from agentic_rl.nets.mlp import mlp


def masked_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Set logits of forbidden actions (``mask`` False) to the dtype's minimum, ``[B, A]``."""
    if mask is None:
        return logits
    mask = mask.bool()
    if not mask.any(-1).all():
        raise ValueError("action mask forbids every action for some row; allow at least one")
    return logits.masked_fill(~mask, torch.finfo(logits.dtype).min)


class MaskedCategoricalActor(nn.Module):
    """pi(a | x) = softmax(logits(x)) restricted to allowed actions.

    Shapes: ``x [B, in_dim]``, ``mask [B, num_actions]`` bool or None, actions ``[B]`` int64.
    """

    def __init__(
        self, in_dim: int, num_actions: int, hidden_sizes: Sequence[int], activation: str = "tanh"
    ) -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden_sizes, num_actions, activation)
        last = self.net[-1]
        nn.init.orthogonal_(last.weight, gain=0.01)
        nn.init.zeros_(last.bias)

    def log_probs(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Normalised log-probabilities of every action, ``[B, num_actions]``."""
        return torch.log_softmax(masked_logits(self.net(x), mask), dim=-1)

    def sample(self, x, mask=None, generator: torch.Generator | None = None):
        log_probs = self.log_probs(x, mask)
        action = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(-1)
        return action, log_probs.gather(-1, action[:, None]).squeeze(-1)

    def evaluate(self, x, action, mask=None):
        log_probs = self.log_probs(x, mask)
        probs = log_probs.exp()
        entropy = -(probs * log_probs.clamp_min(torch.finfo(log_probs.dtype).min)).sum(-1)
        return log_probs.gather(-1, action.long()[:, None]).squeeze(-1), entropy

    def mode(self, x, mask=None):
        return self.log_probs(x, mask).argmax(-1)


class DiagGaussianActor(nn.Module):
    """pi(a | x) = N(mu(x), diag(exp(log_std))) with a state-independent learned ``log_std``.

    Shapes: ``x [B, in_dim]`` -> actions ``[B, act_dim]`` (unbounded; the env clips).
    """

    def __init__(
        self,
        in_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int],
        activation: str = "tanh",
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden_sizes, act_dim, activation)
        self.log_std = nn.Parameter(torch.full((act_dim,), init_log_std))

    def _dist(self, x: torch.Tensor) -> torch.distributions.Normal:
        mean = self.net(x)
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def sample(self, x, mask=None, generator: torch.Generator | None = None):
        dist = self._dist(x)
        noise = torch.randn(dist.loc.shape, generator=generator, dtype=dist.loc.dtype,
                            device=dist.loc.device)
        action = dist.loc + dist.scale * noise
        return action, dist.log_prob(action).sum(-1)

    def evaluate(self, x, action, mask=None):
        dist = self._dist(x)
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1)

    def mode(self, x, mask=None):
        return self.net(x)


class TanhGaussianHead(nn.Module):
    """``nets.actors.TanhGaussianActor`` behind the on-policy head interface.

    The squashed Gaussian has no closed-form entropy; ``evaluate`` returns the single-sample
    estimate ``-log pi(a | x)`` at the evaluated action.
    """

    def __init__(
        self, in_dim: int, act_dim: int, hidden_sizes: Sequence[int], activation: str = "tanh"
    ) -> None:
        super().__init__()
        self.actor = TanhGaussianActor(in_dim, act_dim, hidden_sizes, activation)

    def sample(self, x, mask=None, generator: torch.Generator | None = None):
        action, log_prob, _, _ = self.actor.sample(x, generator)
        return action, log_prob

    def evaluate(self, x, action, mask=None):
        log_prob = self.actor.log_prob(x, action)
        return log_prob, -log_prob

    def mode(self, x, mask=None):
        return self.actor.deterministic(x)


class TanhDiagGaussianActor(DiagGaussianActor):
    """pi(a | x) = tanh(N(mu(x), diag(exp(log_std)))) with a state-independent learned ``log_std``.

    Unlike ``TanhGaussianActor`` the spread starts at ``exp(init_log_std)`` for every state, so an
    on-policy learner explores the whole box from the start (HGPO's Manager uses it for goals).
    ``evaluate`` returns the closed-form entropy of the pre-tanh Gaussian. Actions ``[B, act_dim]``
    in (-1, 1). Same constructor as ``DiagGaussianActor``.
    """

    def sample(self, x, mask=None, generator: torch.Generator | None = None):
        mean = self.net(x)
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype,
                            device=mean.device)
        pre_tanh = mean + self.log_std.exp() * noise
        log_prob = gaussian_log_prob(noise, self.log_std.expand_as(mean))
        return torch.tanh(pre_tanh), log_prob - tanh_log_det_jacobian(pre_tanh)

    def evaluate(self, x, action, mask=None, eps: float = 1e-6):
        mean = self.net(x)
        pre_tanh = torch.atanh(action.clamp(-1.0 + eps, 1.0 - eps))
        log_std = self.log_std.expand_as(mean)
        noise = (pre_tanh - mean) / log_std.exp()
        log_prob = gaussian_log_prob(noise, log_std) - tanh_log_det_jacobian(pre_tanh)
        entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)
        return log_prob, entropy

    def mode(self, x, mask=None):
        return torch.tanh(self.net(x))


class ValueHead(nn.Module):
    """V(x): ``[B, in_dim] -> [B]``."""

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], activation: str = "tanh") -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden_sizes, 1, activation)
        nn.init.orthogonal_(self.net[-1].weight, gain=1.0)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def make_policy_head(
    in_dim: int,
    action_dim: int,
    discrete: bool,
    hidden_sizes: Sequence[int],
    activation: str = "tanh",
    continuous_head: str = "tanh",
) -> nn.Module:
    """A categorical head (``discrete``) or a ``"tanh"`` / ``"gaussian"`` continuous head."""
    if discrete:
        return MaskedCategoricalActor(in_dim, action_dim, hidden_sizes, activation)
    if continuous_head == "tanh":
        return TanhGaussianHead(in_dim, action_dim, hidden_sizes, activation)
    if continuous_head == "gaussian":
        return DiagGaussianActor(in_dim, action_dim, hidden_sizes, activation)
    raise ValueError(f"continuous_head must be 'tanh' or 'gaussian', got {continuous_head!r}")

