"""The learned text Manager as a planner: it picks one of the episode's templated candidate
subgoals (``plan.text_subgoals``) with a :class:`~agentic_rl.nets.text_manager.TextManager`,
reading only what the agent sees (the task and inventory texts and its own past commands with
their feedback): no expert, plan or planner is computed. Also the imitation data: the
decisions a perfect Manager makes in expert demonstrations."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text_manager import TextManager
from agentic_rl.plan.text_subgoals import (ManagerInputs, completed, decision_points,
                                           decision_steps, hindsight_subgoals, manager_inputs)


@dataclasses.dataclass
class Decisions:
    """B Manager decisions as text-table row ids (K: the most candidates of any).

    Attributes:
        heads: ``[B, 3]`` task, inventory and last completed subgoal rows.
        candidates: ``[B, K]`` candidate rows (0-padded).
        counts: ``[B, K]`` completions of each candidate so far.
        held: ``[B, K]`` 1 where the agent carries what the candidate acts on.
        total: ``[B]`` completions so far.
        mask: bool ``[B, K]``, True on real candidates.
    """

    heads: torch.Tensor
    candidates: torch.Tensor
    counts: torch.Tensor
    held: torch.Tensor
    total: torch.Tensor
    mask: torch.Tensor

    def __len__(self) -> int:
        return int(self.total.shape[0])

    def rows(self, index: torch.Tensor) -> "Decisions":
        return Decisions(*(getattr(self, f.name)[index] for f in dataclasses.fields(self)))

    def cat(self, other: "Decisions") -> "Decisions":
        """These decisions, then ``other``'s (candidate columns padded to the wider K)."""
        width = max(self.mask.shape[1], other.mask.shape[1])
        parts = []
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name in ("candidates", "counts", "held", "mask"):
                a, b = (torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in (a, b))
            parts.append(torch.cat([a, b]))
        return Decisions(*parts)


def decisions(table: TextTable, tasks: Sequence[str], inventories: Sequence[str],
              inputs: Sequence[ManagerInputs]) -> Decisions:
    """Row ids of B decisions (texts the table has not seen are added)."""
    width = max(len(x.candidates) for x in inputs)
    count = len(inputs)
    out = Decisions(torch.zeros(count, 3, dtype=torch.int64),
                    torch.zeros(count, width, dtype=torch.int64),
                    torch.zeros(count, width, dtype=torch.int64),
                    torch.zeros(count, width, dtype=torch.int64),
                    torch.tensor([x.total for x in inputs], dtype=torch.int64),
                    torch.zeros(count, width, dtype=torch.bool))
    for b, (task, inventory, x) in enumerate(zip(tasks, inventories, inputs)):
        row = torch.from_numpy(table.ids([task, inventory, x.last, *x.candidates]))
        k = len(x.candidates)
        out.heads[b], out.candidates[b, :k] = row[:3], row[3:]
        out.counts[b, :k] = torch.tensor(x.counts, dtype=torch.int64)
        out.held[b, :k] = torch.tensor(x.held, dtype=torch.int64)
        out.mask[b, :k] = True
    return out


def manager_logits(net: TextManager, embeddings: torch.Tensor, batch: Decisions
                   ) -> torch.Tensor:
    """``[B, K]`` logits of B decisions; ``embeddings``: the table's ``[V, D]`` tensor."""
    return net(embeddings[batch.heads[:, 0]], embeddings[batch.heads[:, 1]],
               embeddings[batch.heads[:, 2]], embeddings[batch.candidates], batch.counts,
               batch.held, batch.total, batch.mask)


def episode_texts(texts: Sequence[str], episode: Any) -> tuple[list[str], list[str]]:
    """``(commands, feedbacks)`` of a ``TextEpisode``: each step's command and the observation
    that answered it ("" for the last step, whose answer the episode does not store)."""
    steps = np.arange(len(episode))
    commands = [texts[int(c)] for c in episode.commands[steps, episode.action]]
    return commands, [texts[int(o)] for o in episode.observation[1:]] + [""]


def label_demos(table: TextTable, episodes: Sequence[Any]) -> tuple[Decisions, torch.Tensor]:
    """Imitation data of a perfect Manager from successful demonstrations (``TextEpisode``).

    Sets each episode's ``subgoal`` to its hindsight subgoals (the next subgoal it completes,
    what the Worker imitates under) and returns the Manager's decisions with the index of the
    subgoal completed next (``[B]``). The last step's feedback is not stored; it won the game,
    so it counts as done.
    """
    tasks, inventories, inputs, labels = [], [], [], []
    texts = table.texts
    for episode in episodes:
        task = texts[episode.task]
        commands, feedbacks = episode_texts(texts, episode)
        episode.subgoal = table.ids(hindsight_subgoals(commands, feedbacks))
        carried = [texts[int(i)] for i in episode.inventory]
        for step, x, label in decision_points(task, commands, feedbacks, carried):
            tasks.append(task)
            inventories.append(carried[step])
            inputs.append(x)
            labels.append(label)
    if not labels:
        raise ValueError("no demonstration completes a templated subgoal: the learned Manager "
                         "has nothing to imitate")
    return decisions(table, tasks, inventories, inputs), torch.tensor(labels)


def dagger_decisions(table: TextTable, episodes: Sequence[Any], period: int
                     ) -> tuple[Decisions, torch.Tensor] | None:
    """Manager DAgger: the Manager's decisions in the states the agent itself reached, each
    labelled with the subgoal the expert pursued there.

    Args:
        episodes: DAgger episodes (``TextEpisode`` with ``expert_subgoal``; relabelled ones
            hold the expert's commands as actions, so the agent's own commands are read from
            ``previous_command``).
        period: the Manager's period (decisions at ``decision_steps``, as the envs made them).

    Returns:
        ``(decisions, labels [B])``; decisions whose expert subgoal is none or not a candidate
        are dropped; None if none is left.
    """
    rows, texts = [], table.texts
    for episode in episodes:
        if episode.expert_subgoal is None:
            continue
        commands = [texts[int(c)] for c in episode.previous_command[1:]] + [""]
        feedbacks = [texts[int(o)] for o in episode.observation[1:]] + [""]
        rows += _subgoal_decisions(texts, episode, commands, feedbacks, period,
                                   episode.expert_subgoal)
    if not rows:
        return None
    tasks, inventories, inputs, labels = zip(*rows)
    return decisions(table, tasks, inventories, inputs), torch.tensor(labels)


def episode_decisions(table: TextTable, episodes: Sequence[Any], period: int
                      ) -> tuple[Decisions, torch.Tensor, torch.Tensor] | None:
    """The Manager's decisions in rollout episodes (``TextEpisode``), rebuilt from what each
    episode stored: its commands, their feedback and the subgoal in force at every step.

    Returns:
        ``(decisions, chosen [B], episode [B])``: the inputs of every decision, the index of
        the subgoal chosen among its candidates, and which episode it belongs to; None if no
        episode holds a decision.
    """
    rows, texts = [], table.texts
    for e, episode in enumerate(episodes):
        commands, feedbacks = episode_texts(texts, episode)
        rows += [(*row, e) for row in _subgoal_decisions(texts, episode, commands, feedbacks,
                                                         period, episode.subgoal)]
    if not rows:
        return None
    tasks, inventories, inputs, chosen, owner = zip(*rows)
    return (decisions(table, tasks, inventories, inputs), torch.tensor(chosen),
            torch.tensor(owner))


def _subgoal_decisions(texts: Sequence[str], episode: Any, commands: Sequence[str],
                       feedbacks: Sequence[str], period: int, subgoals: np.ndarray
                       ) -> Iterator[tuple[str, str, ManagerInputs, int]]:
    """``(task, inventory, inputs, index of subgoals[step] among the candidates)`` at each
    Manager decision of an episode (``decision_steps`` over the agent's ``commands`` and their
    ``feedbacks``) whose subgoal row ``subgoals[step]`` names a candidate."""
    task = texts[episode.task]
    for step in decision_steps(commands, feedbacks, period):
        carried = texts[int(episode.inventory[step])]
        x = manager_inputs(task, zip(commands[:step], feedbacks[:step]), carried)
        subgoal = texts[int(subgoals[step])]
        if subgoal in x.candidates:  # never "": candidates are templates
            yield task, carried, x, x.candidates.index(subgoal)


class LearnedTextManager:
    """Planner over templated subgoals, scored by a shared ``net`` (the learner trains it).

    A new subgoal is chosen at the episode's start, after every step that completes *any*
    candidate subgoal (the Manager's inputs changed) and every ``period`` steps: greedily, or
    sampled from the network's softmax when built with a ``seed`` (training envs). A sample
    depends only on the seed, the env slot, its episode number and the step, so a resumed run
    draws the same subgoals.

    Args:
        net: the Manager network.
        table: the text table (embeddings of task, inventory and candidate texts).
        seed: sample with this seed (None: argmax).
    """

    needs_expert = False

    def __init__(self, net: TextManager, table: TextTable, seed: int | None = None) -> None:
        self.net, self.table, self.seed = net, table, seed

    def sampling(self, seed: int) -> "LearnedTextManager":
        """The same Manager, sampling its subgoals (for the training envs)."""
        return LearnedTextManager(self.net, self.table, seed)

    def reached(self, subgoal: str, command: str, feedback: str) -> bool:
        return completed(command, feedback) is not None

    @torch.no_grad()
    def subgoal(self, task: str, observation: str, inventory: str, commands: list[str],
                info: dict[str, Any], trajectory: Sequence[tuple[str, str]] = ()) -> str:
        inputs = manager_inputs(task, trajectory, inventory)
        if not inputs.candidates:  # a task text without content words
            return ""
        batch = decisions(self.table, [task], [inventory], [inputs])
        logits = manager_logits(self.net, self.table.tensor(), batch)[0]
        if self.seed is None:
            return inputs.candidates[int(logits.argmax())]
        key = [self.seed, int(info.get("slot", 0)), int(info.get("episode", 0)), len(trajectory)]
        probs = torch.softmax(logits.double(), -1).numpy()
        return inputs.candidates[int(np.random.default_rng(key).choice(len(probs), p=probs))]
