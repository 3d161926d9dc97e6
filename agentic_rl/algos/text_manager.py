"""Training of the learned text Manager (``manager.planner: learned``): imitation of the subgoal
a perfect Manager would have chosen at each decision of the expert demonstrations
(``plan.learned.label_demos``) and, with ``manager.dagger``, of the subgoal the expert pursued at
each decision of the DAgger episodes (``plan.learned.dagger_decisions``: the states the agent's
own Manager and Worker reach), one minibatch per imitation step of the Worker; then, with
``manager.rl: group``, a clipped policy-gradient step on its own decisions in each batch of
rollouts, every decision weighted by its episode's return (the env reward summed over all its
periods) minus the mean return of the episodes of the same game, with the imitation term kept
at the Worker's ``opd_alpha``."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from agentic_rl.algos.hgpo_losses import ppo_policy_loss
from agentic_rl.algos.text_losses import (command_cross_entropy, group_advantages,
                                          success_shaping)
from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text_manager import TextManager
from agentic_rl.plan.learned import (Decisions, dagger_decisions, episode_decisions,
                                     episode_texts, label_demos, manager_logits)
from agentic_rl.plan.text_subgoals import period_outcomes

MANAGER_BATCH = 64
MAX_GRAD_NORM = 1.0


class LearnedManagerTrainer:
    """The Manager network (shared with the envs' planner), its optimiser and its data.

    Args:
        net: the network the envs' :class:`~agentic_rl.plan.learned.LearnedTextManager` runs.
        table: the text table of the run.
        lr: Adam learning rate.
        period: the Manager's period.
        dagger: also imitate the expert's subgoals in the DAgger episodes.
    """

    def __init__(self, net: TextManager, table: TextTable, lr: float, period: int = 5,
                 dagger: bool = False) -> None:
        self.net, self.table, self.period, self.dagger = net, table, period, dagger
        self.optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        self.decisions: Decisions | None = None
        self.labels = torch.zeros(0, dtype=torch.int64)
        self.absorbed = 0  # DAgger episodes labelled so far (rebuilt from the storage on resume)

    def set_demos(self, demos: Sequence[Any]) -> None:
        """Label the demonstrations (their ``subgoal`` arrays become hindsight subgoals)."""
        self.decisions, self.labels = label_demos(self.table, demos)

    def loss(self, batch: Decisions, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cross-entropy, accuracy)`` of the Manager on decisions with their labels ``[B]``."""
        logits = manager_logits(self.net, self.table.tensor(), batch)
        loss = command_cross_entropy(logits, labels, torch.ones_like(labels, dtype=torch.bool))
        return loss, (logits.argmax(-1) == labels).float().mean()

    def absorb(self, labelled: Sequence[Any]) -> None:
        """Add the decisions of the DAgger episodes in ``labelled`` (the storage's whole list,
        which only grows) not added yet; a resumed run adds all of them at its first update."""
        if not self.dagger or len(labelled) <= self.absorbed:
            return
        found = dagger_decisions(self.table, labelled[self.absorbed:], self.period)
        self.absorbed = len(labelled)
        if found is not None:
            batch, labels = found
            self.decisions = batch if self.decisions is None else self.decisions.cat(batch)
            self.labels = torch.cat([self.labels, labels])

    def imitation_step(self, generator: torch.Generator) -> dict[str, float]:
        """One Adam step on ``MANAGER_BATCH`` decisions drawn with ``generator``."""
        if self.decisions is None:
            return {}
        loss, accuracy = self._imitation(generator)
        self._step(loss)
        return {"losses/manager_imitation": float(loss.detach()),
                "train/manager_accuracy": float(accuracy),
                "train/manager_examples": float(len(self.labels))}

    def _imitation(self, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        pick = torch.randint(len(self.labels), (MANAGER_BATCH,), generator=generator)
        return self.loss(self.decisions.rows(pick), self.labels[pick])

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), MAX_GRAD_NORM)
        self.optimizer.step()

    def _log_probs(self, batch: Decisions, chosen: torch.Tensor) -> torch.Tensor:
        logits = manager_logits(self.net, self.table.tensor(), batch)
        return torch.log_softmax(logits, -1).gather(-1, chosen[:, None]).squeeze(-1)

    def group_update(self, episodes: Sequence[Any], period: int, alpha: float, epochs: int,
                     clip_range: float, generator: torch.Generator) -> dict[str, float]:
        """``epochs`` clipped policy-gradient steps on the Manager's decisions in one batch of
        rollouts (``TextEpisode`` with ``group_size`` episodes per game), plus ``alpha`` x the
        imitation loss."""
        found = episode_decisions(self.table, episodes, period)
        if found is None:
            return {}
        batch, chosen, owner = found
        returns = np.asarray([float(e.reward.sum()) for e in episodes])
        games = np.unique([e.game for e in episodes], return_inverse=True)[1]
        advantages = torch.from_numpy(group_advantages(returns, games)[0])[owner]
        with torch.no_grad():
            old = self._log_probs(batch, chosen)
        sums = {"losses/manager_policy_loss": 0.0, "train/manager_approx_kl": 0.0}
        for _ in range(epochs):
            loss, kl, _ = ppo_policy_loss(self._log_probs(batch, chosen), old, advantages,
                                          clip_range)
            sums["losses/manager_policy_loss"] += float(loss.detach()) / epochs
            sums["train/manager_approx_kl"] += float(kl) / epochs
            if alpha > 0 and self.decisions is not None:
                loss = loss + alpha * self._imitation(generator)[0]
            self._step(loss)
        return {**sums, "train/manager_decisions": float(len(chosen))}

    def state_dict(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])


def success_rewards(texts: Sequence[str], episodes: Sequence[Any], chance: np.ndarray,
                    period: int, coef: float) -> tuple[list[np.ndarray], np.ndarray]:
    """The Worker's rewards with the success predictor's intrinsic term, and its labels.

    Args:
        texts: the text table's texts.
        episodes: E ``TextEpisode`` of the learned Manager's runs.
        chance: ``[E, T]`` predicted chance that each step's subgoal is finished in its period.
        period: the Manager's period.
        coef: weight of the intrinsic term (``algorithm.success_predictor``).

    Returns:
        ``(rewards, labels)``: per episode, ``reward + coef * success_shaping(...)``; and every
        step's label ``[S]`` (its period ends with its subgoal done), episodes in order.
    """
    rewards, labels = [], []
    for i, episode in enumerate(episodes):
        commands, feedbacks = episode_texts(texts, episode)
        subgoals = [texts[int(g)] for g in episode.subgoal]
        ends, succeeds = period_outcomes(commands, feedbacks, subgoals, period)
        bonus = success_shaping(chance[i, : len(episode)], np.asarray(ends), np.asarray(succeeds))
        rewards.append(episode.reward + coef * bonus)
        labels.append(np.asarray(succeeds, np.float32))
    return rewards, np.concatenate(labels)
