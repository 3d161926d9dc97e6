"""Skills that are the phases of one task (issue 22; doc hermes-opd 5.1): each phase a named
skill with its own prototype buffer, filled from demonstrations (and the agent's own successes)
cut into phases; a skill manager that says which phase a state is in; and a distillation batch
drawn phase by phase in the proportions of the phases of the states being learnt from, so the
distillation term is conditioned on the active skill of each state.

The manager is the task's phase rule (``selection: rule``) or a nearest-neighbour classifier
fitted to the phase-labelled demonstration states (``selection: learned``: at decision time no
rule runs).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from agentic_rl.data.prototypes import PrototypeBuffer

GRASP_RADIUS = 0.02  # metres: the gripper is around the block (the expert's test)
PLACED_RADIUS = 0.05  # metres: the block is at the goal (the env's success threshold)
REFERENCE_POINTS = 2_000  # demonstration states the learned manager keeps


def pick_and_place_phase(obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """Phase of FetchPickAndPlace states: 0 reach (move above the block, fingers open),
    1 grasp (descend and close), 2 carry (block held, away from the goal), 3 place (block at
    the goal).

    Args:
        obs: ``[B, 25]`` raw Fetch observations (grip ``0:3``, block ``3:6``, fingers ``9:11``).
        goal: ``[B, 3]`` desired goals.

    Returns:
        ``[B]`` int64 phase indices.
    """
    grip, block = obs[:, 0:3], obs[:, 3:6]
    fingers = obs[:, 9] + obs[:, 10]
    horizontal = torch.linalg.vector_norm(grip[:, :2] - block[:, :2], dim=1)
    held = (horizontal < GRASP_RADIUS) & ((grip[:, 2] - block[:, 2]).abs() < GRASP_RADIUS) & (
        fingers < 0.06)
    placed = torch.linalg.vector_norm(block - goal, dim=1) < PLACED_RADIUS
    phase = torch.where(horizontal > 0.01, 0, 1)
    phase = torch.where(held, 2, phase)
    return torch.where(placed, 3, phase).long()


TASKS: dict[str, tuple[tuple[str, ...], Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "pick_and_place": (("reach", "grasp", "carry", "place"), pick_and_place_phase)}


class NearestPhase:
    """Phase of a state = the phase label of the nearest demonstration state, distances in
    units of each input dimension's spread over the demonstrations."""

    def __init__(self, seed: int = 0) -> None:
        self.points: torch.Tensor | None = None  # [M, D] scaled
        self.labels: torch.Tensor | None = None  # [M]
        self.scale: torch.Tensor | None = None  # [D]
        self.generator = torch.Generator().manual_seed(seed)

    def fit(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        """``inputs [M, D]`` (observation and goal) with ``labels [M]``; keeps at most
        ``REFERENCE_POINTS`` of them, drawn at random."""
        if len(inputs) > REFERENCE_POINTS:
            keep = torch.randperm(len(inputs), generator=self.generator)[:REFERENCE_POINTS]
            inputs, labels = inputs[keep], labels[keep]
        self.scale = inputs.std(dim=0).clamp_min(1e-3)
        self.points, self.labels = inputs / self.scale, labels

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.points is None:
            raise RuntimeError("the learned phase manager has no demonstrations to learn from")
        nearest = torch.cdist(inputs / self.scale, self.points).argmin(dim=1)
        return self.labels[nearest]


class PhaseSkills:
    """Phase skills of ``task`` with one prototype buffer each.

    Args:
        task: a key of ``TASKS``.
        selection: ``rule`` or ``learned`` (see the module docstring).
        capacity, sampling: of each phase's ``PrototypeBuffer``.
    """

    def __init__(self, task: str, selection: str, capacity: int, sampling: str) -> None:
        self.names, self.rule = TASKS[task]
        self.selection = selection
        self.learned = NearestPhase()
        self._demo_inputs: list[torch.Tensor] = []
        self._demo_labels: list[torch.Tensor] = []
        self.prototypes = {name: PrototypeBuffer(capacity, sampling) for name in self.names}
        self.active_counts = np.zeros(len(self.names))  # since the last metrics()

    def phase(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """``[B]`` phase of each state (``obs [B, o]``, ``goal [B, g]``) by the manager."""
        if self.selection == "rule":
            return self.rule(obs, goal)
        return self.learned(torch.cat([obs, goal], dim=1))

    def add_episode(self, episode: dict[str, torch.Tensor], source: str,
                    episode_return: float) -> None:
        """Cut ``episode`` (fields ``[L, ...]``) into phases and add each piece to its phase's
        buffer: demonstrations (``expert``) by the rule, which also teaches the learned
        manager; the agent's own episodes by the manager."""
        obs, goal = episode["obs"], episode["desired_goal"]
        if source == "expert":
            labels = self.rule(obs, goal)
            self._demo_inputs.append(torch.cat([obs, goal], dim=1))
            self._demo_labels.append(labels)
            self.learned.fit(torch.cat(self._demo_inputs), torch.cat(self._demo_labels))
        else:
            labels = self.phase(obs, goal)
        starts = [0] + [t for t in range(1, len(labels)) if labels[t] != labels[t - 1]]
        for start, end in zip(starts, starts[1:] + [len(labels)]):
            piece = {k: v[start:end] for k, v in episode.items()}
            self.prototypes[self.names[int(labels[start])]].add_episode(
                piece, source, task_id=self.names[int(labels[start])],
                episode_return=episode_return)

    def prototype_batch(self, obs: torch.Tensor, goal: torch.Tensor, size: int,
                        generator: torch.Generator) -> dict[str, torch.Tensor] | None:
        """``size`` prototypes, from each phase in proportion to the phases of the states
        ``obs [B, o]`` / ``goal [B, g]`` (phases without prototypes are skipped)."""
        phases = self.phase(obs, goal)
        counts = torch.bincount(phases, minlength=len(self.names)).numpy()
        self.active_counts += counts
        filled = [i for i, name in enumerate(self.names)
                  if counts[i] > 0 and len(self.prototypes[name]) > 0]
        if not filled:
            return None
        share = counts[filled] / counts[filled].sum()
        sizes = np.floor(share * size).astype(int)
        sizes[np.argmax(share)] += size - sizes.sum()
        parts = [self.prototypes[self.names[i]].sample(int(n), generator)
                 for i, n in zip(filled, sizes) if n > 0]
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}

    def metrics(self) -> dict[str, float]:
        """Per phase: its share of the states learnt from since the last call, and its
        prototype transitions."""
        total = max(self.active_counts.sum(), 1.0)
        out = {f"skills/{name}_share": float(self.active_counts[i] / total)
               for i, name in enumerate(self.names)}
        out |= {f"skills/{name}_prototypes": float(len(self.prototypes[name]))
                for name in self.names}
        self.active_counts[:] = 0
        return out
