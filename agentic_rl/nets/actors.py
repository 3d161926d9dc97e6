"""Actors: a tanh-squashed Gaussian for continuous actions.

The actor works in the normalised action box [-1, 1]^act_dim; the algorithm rescales to the
environment's bounds. Its deterministic action is ``tanh(mean_head(trunk(x)))``, a chain of
Linear / ReLU / Tanh layers that ``agentic_rl.verify.bounds`` can bound soundly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from agentic_rl.nets.mlp import mlp

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class TanhGaussianActor(nn.Module):
    """pi(a | x) = tanh(N(mu(x), sigma(x))).

    Shapes: ``x [B, in_dim]`` -> ``mean, log_std [B, act_dim]``.
    """

    def __init__(
        self,
        in_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int],
        activation: str = "relu",
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        self.trunk = mlp(in_dim, hidden_sizes, None, activation, layer_norm)
        width = hidden_sizes[-1] if hidden_sizes else in_dim
        self.mean_head = nn.Linear(width, act_dim)
        self.log_std_head = nn.Linear(width, act_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.trunk(x)
        log_std = torch.tanh(self.log_std_head(hidden))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return self.mean_head(hidden), log_std

    def deterministic(self, x: torch.Tensor) -> torch.Tensor:
        """The mode of the squashed distribution, ``[B, act_dim]`` in [-1, 1]."""
        return torch.tanh(self.mean_head(self.trunk(x)))

    def deterministic_net(self) -> nn.Sequential:
        """The deterministic policy as one ``nn.Sequential`` (trunk, mean head, Tanh).

        Shares parameters with the actor; used by the verifier.
        """
        return nn.Sequential(*self.trunk, self.mean_head, nn.Tanh())

    def sample(
        self, x: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised sample.

        Returns:
            action ``[B, act_dim]`` in (-1, 1), its log-probability ``[B]``, the pre-tanh mean
            ``[B, act_dim]`` and the standard deviation ``[B, act_dim]``.
        """
        mean, log_std = self(x)
        std = log_std.exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        pre_tanh = mean + std * noise
        action = torch.tanh(pre_tanh)
        log_prob = gaussian_log_prob(noise, log_std) - tanh_log_det_jacobian(pre_tanh)
        return action, log_prob, mean, std

    def sample_action(self, x: torch.Tensor, generator: torch.Generator | None = None
                      ) -> torch.Tensor:
        """The action of ``sample`` (same noise draw, same numbers) without its log-probability:
        what acting in the environment needs."""
        mean, log_std = self(x)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return torch.tanh(mean + log_std.exp() * noise)

    def log_prob(self, x: torch.Tensor, action: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """log pi(action | x) for actions in [-1, 1] (clipped to stay invertible), ``[B]``."""
        mean, log_std = self(x)
        action = action.clamp(-1.0 + eps, 1.0 - eps)
        pre_tanh = torch.atanh(action)
        noise = (pre_tanh - mean) / log_std.exp()
        return gaussian_log_prob(noise, log_std) - tanh_log_det_jacobian(pre_tanh)


def gaussian_log_prob(noise: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log-density of ``mean + std * noise`` under N(mean, std), summed over the last dim."""
    return (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def tanh_log_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """sum log(1 - tanh(u)^2), computed stably as 2 (log 2 - u - softplus(-2u))."""
    return (2.0 * (math.log(2.0) - pre_tanh - nn.functional.softplus(-2.0 * pre_tanh))).sum(-1)
