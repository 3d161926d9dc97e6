"""Scripted shortest-path expert for the grid worlds (prototype / demonstration data).

The expert runs a breadth-first search backwards from the goal over states ``(cell, has_key)``
using the environment's own transition function, so it knows that the door needs the key. It acts
on the same dict observations the agents see (coordinates in [-1, 1]).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from agentic_rl.envs.gridworld import GridCore

UNREACHABLE = np.iinfo(np.int64).max


class GridWorldExpert:
    """Optimal actions for ``GridWorldEnv`` / ``BatchGridWorld`` observations.

    Args:
        core: the env's ``GridCore`` (``env.core`` / ``batch_env.core``).
    """

    def __init__(self, core: GridCore) -> None:
        self.core = core
        height, width = core.layout.shape
        cells = np.array([(r, c) for r in range(height) for c in range(width)], dtype=np.int64)
        # The outer wall ring is never occupied; keep it in place so moves stay in bounds.
        inner = (cells > 0).all(1) & (cells[:, 0] < height - 1) & (cells[:, 1] < width - 1)
        self._next: dict[bool, np.ndarray] = {}  # has_key -> [H*W, 4] next state index
        for key in (False, True):
            keys = np.full(len(cells), key)
            nxt = []
            for action in range(4):
                pos, has = cells.copy(), keys.copy()
                pos[inner], has[inner] = self.core.move(
                    cells[inner], keys[inner], np.full(int(inner.sum()), action)
                )
                nxt.append((pos[:, 0] * width + pos[:, 1]) * 2 + has)
            self._next[key] = np.stack(nxt, axis=1)
        self._width = width
        self._cache: dict[tuple[int, int], np.ndarray] = {}

    def distances(self, goal: tuple[int, int]) -> np.ndarray:
        """Steps to ``goal`` from every state ``(cell * 2 + has_key)``, ``[H * W * 2]``."""
        if goal in self._cache:
            return self._cache[goal]
        transitions = np.concatenate([self._next[False][:, None], self._next[True][:, None]], 1)
        transitions = transitions.reshape(-1, 4)  # state index -> next state index per action
        predecessors: list[list[int]] = [[] for _ in range(len(transitions))]
        for state, nexts in enumerate(transitions):
            for nxt in set(nexts.tolist()):
                predecessors[nxt].append(state)
        dist = np.full(len(transitions), UNREACHABLE, dtype=np.int64)
        goal_index = goal[0] * self._width + goal[1]
        queue = deque([goal_index * 2, goal_index * 2 + 1])
        dist[list(queue)] = 0
        while queue:
            state = queue.popleft()
            for prev in predecessors[state]:
                if dist[prev] == UNREACHABLE:
                    dist[prev] = dist[state] + 1
                    queue.append(prev)
        self._cache[goal] = dist
        return dist

    def cells(self, coords: np.ndarray) -> np.ndarray:
        """Coordinates in [-1, 1] ``[N, 2]`` -> integer cells ``[N, 2]``."""
        return np.rint((np.asarray(coords) + 1.0) / self.core.scale + 1.0).astype(np.int64)

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Shortest-path actions ``[N]`` for batched observations (ties: lowest action index).

        Raises:
            ValueError: if a goal cannot be reached from the current state.
        """
        pos = self.cells(np.atleast_2d(obs["achieved_goal"]))
        goals = self.cells(np.atleast_2d(obs["desired_goal"]))
        has_key = np.atleast_2d(obs["observation"])[:, 2] > 0.5
        actions = np.zeros(len(pos), dtype=np.int64)
        for i, (cell, goal, key) in enumerate(zip(pos, goals, has_key)):
            dist = self.distances((int(goal[0]), int(goal[1])))
            state = (cell[0] * self._width + cell[1]) * 2 + int(key)
            if dist[state] == UNREACHABLE:
                raise ValueError(f"goal {tuple(goal)} is unreachable from cell {tuple(cell)}")
            actions[i] = int(np.argmin(dist[self._next[bool(key)][state // 2]]))
        return actions
