"""Training of the learned text Manager (``manager.planner: learned``): imitation of the subgoal
a perfect Manager would have chosen at each decision of the expert demonstrations
(``plan.learned.label_demos``), one minibatch per imitation step of the Worker."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from agentic_rl.algos.text_losses import command_cross_entropy
from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text_manager import TextManager
from agentic_rl.plan.learned import Decisions, label_demos, manager_logits

MANAGER_BATCH = 64
MAX_GRAD_NORM = 1.0


class LearnedManagerTrainer:
    """The Manager network (shared with the envs' planner), its optimiser and its data.

    Args:
        net: the network the envs' :class:`~agentic_rl.plan.learned.LearnedTextManager` runs.
        table: the text table of the run.
        lr: Adam learning rate.
    """

    def __init__(self, net: TextManager, table: TextTable, lr: float) -> None:
        self.net, self.table = net, table
        self.optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        self.decisions: Decisions | None = None
        self.labels = torch.zeros(0, dtype=torch.int64)

    def set_demos(self, demos: Sequence[Any]) -> None:
        """Label the demonstrations (their ``subgoal`` arrays become hindsight subgoals)."""
        self.decisions, self.labels = label_demos(self.table, demos)

    def loss(self, batch: Decisions, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cross-entropy, accuracy)`` of the Manager on decisions with their labels ``[B]``."""
        logits = manager_logits(self.net, self.table.tensor(), batch)
        loss = command_cross_entropy(logits, labels, torch.ones_like(labels, dtype=torch.bool))
        return loss, (logits.argmax(-1) == labels).float().mean()

    def imitation_step(self, generator: torch.Generator) -> dict[str, float]:
        """One Adam step on ``MANAGER_BATCH`` decisions drawn with ``generator``."""
        if self.decisions is None:
            return {}
        pick = torch.randint(len(self.labels), (MANAGER_BATCH,), generator=generator)
        loss, accuracy = self.loss(self.decisions.rows(pick), self.labels[pick])
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), MAX_GRAD_NORM)
        self.optimizer.step()
        return {"losses/manager_imitation": float(loss.detach()),
                "train/manager_accuracy": float(accuracy)}

    def state_dict(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
