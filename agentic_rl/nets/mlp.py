"""Multi-layer perceptrons as ``nn.Sequential`` of Linear / activation (/ LayerNorm) layers.

Keeping them plain ``nn.Sequential`` lets the verifier (``agentic_rl.verify.bounds``) walk the
layers one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(
    in_dim: int,
    hidden_sizes: Sequence[int],
    out_dim: int | None = None,
    activation: str = "relu",
    layer_norm: bool = False,
) -> nn.Sequential:
    """Build ``Linear -> [LayerNorm] -> act`` blocks, then an optional output ``Linear``.

    Args:
        in_dim: input features.
        hidden_sizes: width of each hidden layer.
        out_dim: output features; ``None`` ends after the last hidden activation.
        activation: ``"relu"`` or ``"tanh"``.
        layer_norm: insert ``LayerNorm`` after each hidden ``Linear``.

    Returns:
        A module mapping ``[B, in_dim]`` to ``[B, out_dim or hidden_sizes[-1]]``.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        layers.append(nn.Linear(width, hidden))
        if layer_norm:
            layers.append(nn.LayerNorm(hidden))
        layers.append(ACTIVATIONS[activation]())
        width = hidden
    if out_dim is not None:
        layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers evaluated in one batched matmul.

    Input ``[n, B, in]`` (or ``[B, in]``, broadcast to every member), output ``[n, B, out]``.
    """

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features))
        bound = 1.0 / in_features**0.5  # same init as nn.Linear
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            # A shared input is one GEMM against the members' weights side by side: much faster
            # on CPU than a batched matmul over a stride-0 expanded input.
            members, in_features, out_features = self.weight.shape
            stacked = self.weight.permute(1, 0, 2).reshape(in_features, members * out_features)
            out = torch.addmm(self.bias.view(-1), x, stacked)  # bias [n, 1, out] is contiguous
            return out.view(x.shape[0], members, out_features).transpose(0, 1)
        return torch.baddbmm(self.bias, x, self.weight)


def ensemble_mlp(
    n: int, in_dim: int, hidden_sizes: Sequence[int], out_dim: int, activation: str = "relu"
) -> nn.Sequential:
    """``n`` MLPs with identical shapes run as one: ``[B, in] -> [n, B, out]``."""
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        # In place: the ensembles' activations are the largest tensors of an update.
        act = nn.ReLU(inplace=True) if activation == "relu" else ACTIVATIONS[activation]()
        layers += [EnsembleLinear(n, width, hidden), act]
        width = hidden
    layers.append(EnsembleLinear(n, width, out_dim))
    return nn.Sequential(*layers)
