"""Goal-space networks for HGPO: both levels, the encoder phi, conditioning, a success predictor.

``ManagerNet`` and ``WorkerNet`` are the two levels. ``GoalEncoder`` maps an observation to a
low-dimensional goal space bounded in [-1, 1] (the Manager's tanh-bounded goals live in the same
box). ``GoalConditioner`` joins an observation and a goal into worker features by concatenation
or FiLM. ``SuccessPredictor`` estimates the chance that the Worker reaches goal ``g`` from
``phi(s)`` (doc 1 section 5.2).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from agentic_rl.nets.categorical import TanhDiagGaussianActor, ValueHead, make_policy_head
from agentic_rl.nets.mlp import mlp


class GoalEncoder(nn.Module):
    """phi(s) = tanh(MLP(s)): ``[B, obs_dim] -> [B, goal_dim]`` in (-1, 1)."""

    def __init__(self, obs_dim: int, goal_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden_sizes, goal_dim, "relu")

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


class GoalConditioner(nn.Module):
    """Worker features from an observation ``[B, obs_dim]`` and a goal ``[B, goal_dim]``.

    ``"concat"``: ``cat(obs, goal)`` of width ``obs_dim + goal_dim``.
    ``"film"``: ``h = tanh(W s)``, then
    ``(1 + gamma(g)) * h + beta(g)`` of width ``film_width`` (feature-wise linear modulation).
    """

    def __init__(self, obs_dim: int, goal_dim: int, mode: str, film_width: int = 64) -> None:
        super().__init__()
        if mode not in ("concat", "film"):
            raise ValueError(f"conditioning must be 'concat' or 'film', got {mode!r}")
        self.mode = mode
        if mode == "concat":
            self.out_dim = obs_dim + goal_dim
        else:
            self.out_dim = film_width
            self.obs_proj = nn.Linear(obs_dim, film_width)
            self.film = nn.Linear(goal_dim, 2 * film_width)

    def forward(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        if self.mode == "concat":
            return torch.cat([obs, goal], dim=-1)
        gamma, beta = self.film(goal).chunk(2, dim=-1)
        return (1.0 + gamma) * torch.tanh(self.obs_proj(obs)) + beta


class SuccessPredictor(nn.Module):
    """Logit of P(worker reaches g | phi(s), g): ``[B, G], [B, G] -> [B]``."""

    def __init__(self, goal_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(2 * goal_dim, hidden_sizes, 1, "relu")

    def forward(self, phi: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([phi, goal - phi], dim=-1)).squeeze(-1)


class ManagerNet(nn.Module):
    """State -> goal policy (tanh-Gaussian, bounded in [-1, 1]^G; its Gaussian is the exploration
    noise, starting at std ``exp(init_log_std)``) and value, optionally over a GRU.

    ``features(x [B, in_dim], h_prev [B, H] or None) -> [B, F]``: the GRU cell's new hidden state
    when recurrent (it advances once per Manager decision), else ``x`` itself.
    """

    def __init__(
        self,
        in_dim: int,
        goal_dim: int,
        hidden_sizes: Sequence[int],
        activation: str,
        recurrent: bool = False,
        gru_hidden: int = 64,
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        self.gru = nn.GRUCell(in_dim, gru_hidden) if recurrent else None
        width = gru_hidden if recurrent else in_dim
        self.policy = TanhDiagGaussianActor(width, goal_dim, hidden_sizes, activation, init_log_std)
        self.value = ValueHead(width, hidden_sizes, activation)

    def features(self, x: torch.Tensor, h_prev: torch.Tensor | None) -> torch.Tensor:
        if self.gru is None:
            return x
        if h_prev is None:
            raise ValueError("a recurrent manager needs its previous hidden state")
        return self.gru(x, h_prev)


class WorkerNet(nn.Module):
    """pi(a | s, g) and V(s, g) over goal-conditioned features (separate conditioners).

    Shapes: ``obs [B, obs_dim]``, ``goal [B, goal_dim]``, ``mask [B, A]`` or None.
    """

    def __init__(
        self,
        obs_dim: int,
        goal_dim: int,
        action_dim: int,
        discrete: bool,
        hidden_sizes: Sequence[int],
        activation: str,
        conditioning: str,
        continuous_head: str,
    ) -> None:
        super().__init__()
        self.policy_cond = GoalConditioner(obs_dim, goal_dim, conditioning)
        self.value_cond = GoalConditioner(obs_dim, goal_dim, conditioning)
        self.policy = make_policy_head(
            self.policy_cond.out_dim, action_dim, discrete, hidden_sizes, activation,
            continuous_head,
        )
        self.value = ValueHead(self.value_cond.out_dim, hidden_sizes, activation)

    def sample(self, obs, goal, mask=None, generator=None):
        return self.policy.sample(self.policy_cond(obs, goal), mask, generator)

    def mode(self, obs, goal, mask=None):
        return self.policy.mode(self.policy_cond(obs, goal), mask)

    def evaluate(self, obs, goal, action, mask=None):
        return self.policy.evaluate(self.policy_cond(obs, goal), action, mask)

    def value_of(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        return self.value(self.value_cond(obs, goal))
