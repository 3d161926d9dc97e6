"""The algorithm contract every learner follows (see DESIGN.md).

An algorithm never steps an environment, writes a file or logs: the loop in ``agentic_rl.train``
does that. ``update`` is the only training entry point and returns plain float metrics with
namespaced keys (``losses/...``, ``train/...``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class Algorithm(Protocol):
    """What the collector, loop, evaluator and checkpointer rely on."""

    def act(
        self, obs: dict[str, torch.Tensor], state: Any, deterministic: bool
    ) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """Choose actions for a batch of observations.

        Args:
            obs: observation tensors with a leading env dimension ``[N, ...]`` (raw, unnormalised).
            state: recurrent / hierarchical state carried between steps (``None`` at start).
            deterministic: evaluation mode (no exploration noise).

        Returns:
            ``(action [N, act_dim] in env units, new state, extras to store with the transition)``.
        """
        ...

    def update(self, batch: Any) -> dict[str, float]:
        """One gradient step (or one epoch for on-policy learners); returns metrics."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training: networks, optimisers, normalisers."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict``."""
        ...
