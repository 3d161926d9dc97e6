"""Critics: an ensemble of Q(s, a) heads evaluated in one pass."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn

from agentic_rl.nets.mlp import ensemble_mlp


class EnsembleQ(nn.Module):
    """``num_q`` Q-functions (twin Q for ``num_q=2``) sharing one batched forward pass.

    ``forward(obs [B, obs_dim], action [B, act_dim]) -> q [num_q, B]``.
    """

    def __init__(
        self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], num_q: int = 2
    ) -> None:
        super().__init__()
        self.num_q = num_q
        self.net = ensemble_mlp(num_q, obs_dim + act_dim, hidden_sizes, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)


def frozen_alias(module: nn.Module) -> nn.Module:
    """A copy of ``module`` whose parameters alias the original's storage (so it always holds
    the current weights, also after optimiser steps and ``load_state_dict``) but take no
    gradient: a loss through it reaches only its inputs. Build it after moving ``module`` to
    its device."""
    alias = copy.deepcopy(module)
    for name, param in module.named_parameters():
        owner, _, attr = name.rpartition(".")
        setattr(alias.get_submodule(owner), attr, nn.Parameter(param.detach(), requires_grad=False))
    return alias
