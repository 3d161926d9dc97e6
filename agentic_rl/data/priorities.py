"""Proportional prioritised replay (Schaul et al. 2016): a sum tree over a replay buffer's
transitions, stratified sampling in proportion to ``priority ** alpha`` and importance-sampling
weights ``(N P(i)) ** -beta``.

A transition's priority is ``(|TD error| + epsilon) ** alpha`` of the latest update that
sampled it; a transition is first sampleable (its episode just ended) at the largest priority
seen so far, so every transition is drawn at least about once. Transitions of unfinished or
overwritten episodes have priority 0 and are never drawn. The weights are normalised by the
largest weight in the batch (as Dopamine does) rather than by the buffer's smallest priority:
with sparse goal rewards many TD errors fall near 0, and the buffer-wide bound would shrink
every step by orders of magnitude.
"""

from __future__ import annotations

import numpy as np
import torch


class SumTree:
    """Sums of ``size`` non-negative leaf values in a binary tree: set leaves and draw the leaf
    where a prefix sum falls, both vectorised over a batch, ``O(log size)`` numpy calls each.
    Inner nodes are recomputed from their children (never updated by differences), so sums do
    not drift."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.leaf_start = 1 << max(0, (size - 1).bit_length())  # leaves [start, 2 start)
        self.tree = np.zeros(2 * self.leaf_start)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def leaves(self) -> np.ndarray:
        """``[size]`` leaf values (a view)."""
        return self.tree[self.leaf_start:self.leaf_start + self.size]

    def set(self, index: np.ndarray, value: np.ndarray | float) -> None:
        """Leaves ``index [K]`` take ``value`` (``[K]`` or a scalar); for a repeated index the
        last value wins."""
        node = np.asarray(index, dtype=np.int64) + self.leaf_start
        if node.size == 0:
            return
        if node.min() < self.leaf_start or node.max() >= self.leaf_start + self.size:
            raise IndexError(f"sum-tree index out of range [0, {self.size})")
        self.tree[node] = value
        while node[0] > 1:  # repeated parents get the same sum twice: no need to deduplicate
            node = node >> 1
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each ``prefix [B]`` in ``[0, total)`` the leaf ``i`` with
        ``sum(leaves[:i]) <= prefix < sum(leaves[:i + 1])``; never a zero leaf while the total
        is positive (rounding cannot step into an empty subtree)."""
        value = np.asarray(prefix, dtype=np.float64).copy()
        node = np.ones(value.shape, dtype=np.int64)
        while node.size and node[0] < self.leaf_start:
            left = 2 * node
            left_sum = self.tree[left]
            right = (value >= left_sum) & (self.tree[left + 1] > 0)
            value -= np.where(right, left_sum, 0.0)
            node = left + right
        return node - self.leaf_start

    def load(self, leaves: np.ndarray) -> None:
        """Set every leaf at once (from a checkpoint) and rebuild the inner sums."""
        if leaves.shape != (self.size,):
            raise ValueError(f"expected {self.size} priorities, got {leaves.shape}")
        self.tree[:] = 0.0
        self.tree[self.leaf_start:self.leaf_start + self.size] = leaves
        start = self.leaf_start
        while start > 1:
            parents = np.arange(start // 2, start)
            self.tree[parents] = self.tree[2 * parents] + self.tree[2 * parents + 1]
            start //= 2


class Priorities:
    """The priorities of one replay buffer's ``size`` flat transition slots.

    Args:
        size: slots (``ReplayBuffer``'s ``capacity * num_envs``).
        alpha: how strongly priorities shape sampling (0: uniform).
        epsilon: added to ``|TD error|`` so no sampled transition falls to priority 0.
    """

    def __init__(self, size: int, alpha: float, epsilon: float) -> None:
        self.tree = SumTree(size)
        self.alpha, self.epsilon = alpha, epsilon
        self.max_priority = 1.0  # largest |TD error| + epsilon so far (before ** alpha)

    def add(self, index: np.ndarray) -> None:
        """Slots ``index`` hold newly finished transitions: the largest priority so far."""
        self.tree.set(index, self.max_priority ** self.alpha)

    def remove(self, index: np.ndarray) -> None:
        """Slots ``index`` are being overwritten: never drawn again."""
        self.tree.set(index, 0.0)

    def update(self, index: torch.Tensor, td_error: torch.Tensor) -> None:
        """``index [B]`` slots were sampled and gave ``|TD error| td_error [B]``."""
        priority = np.abs(td_error.detach().double().cpu().numpy()) + self.epsilon
        self.max_priority = max(self.max_priority, float(priority.max(initial=0.0)))
        self.tree.set(index.cpu().numpy(), priority ** self.alpha)

    def sample(self, count: int, generator: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` slots drawn by stratified sampling in proportion to their priority, and
        each one's probability: ``(index [count] int64, probability [count] float64)``."""
        total = self.tree.total
        if total <= 0:
            raise RuntimeError("no finished episode in the replay buffer yet; raise "
                               "training.learning_starts above one episode length times the "
                               "number of envs (all rollout workers' envs together)")
        uniform = torch.rand(count, generator=generator, dtype=torch.float64).numpy()
        prefix = (np.arange(count) + uniform) * (total / count)
        index = self.tree.find(np.minimum(prefix, np.nextafter(total, 0.0)))
        probability = self.tree.tree[index + self.tree.leaf_start] / total
        return torch.from_numpy(index), torch.from_numpy(probability)

    def state_arrays(self, used: int | None = None) -> dict[str, np.ndarray]:
        """The first ``used`` slots' priorities (the rest are 0) and the largest so far."""
        return {"leaves": self.tree.leaves()[:used].copy(),
                "max_priority": np.array([self.max_priority])}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        leaves = np.zeros(self.tree.size)
        saved = arrays["leaves"]
        if saved.shape[0] > self.tree.size:
            raise ValueError("checkpointed priorities do not fit this config's buffer_size")
        leaves[:saved.shape[0]] = saved
        self.tree.load(leaves)
        self.max_priority = float(arrays["max_priority"][0])


def importance_weights(probability: torch.Tensor, count: torch.Tensor | int,
                       beta: float) -> torch.Tensor:
    """``(N P(i)) ** -beta`` for ``probability [B]`` and the number ``count`` (``[B]`` or a
    scalar) of transitions each was drawn among; not yet normalised."""
    return (probability * count).pow(-beta)
