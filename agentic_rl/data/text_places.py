"""A text agent's memory of places: for each "go to X" command, whether the agent has looked at
X in this episode and whether a task word (the object to find, the lamp to use) was there.

Greedy ALFWorld agents that lost their way walked between places they had already looked at
until the episode ended; the history bucket says a place was visited, not what was seen there.
The env wrapper (``collect.text_inputs``) keeps one :class:`PlaceMemory` per episode and the
learner rebuilds the same buckets from a stored episode's rows (:func:`place_buckets`).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from agentic_rl.data.text_table import TextTable

NOT_LOOKED, TASK_WORD_SEEN, NOTHING_SEEN = 0, 1, 2
PLACE_BUCKETS = 3
LOOKING_VERBS = ("go to ", "open ")  # commands whose feedback describes the place


@functools.lru_cache(maxsize=65536)
def place_of(command: str, verbs: tuple[str, ...] = LOOKING_VERBS) -> str:
    """The place a command looks at ("go to drawer 1" and "open drawer 1": "drawer 1"; "" for
    other commands)."""
    for verb in verbs:
        if command.startswith(verb):
            return command[len(verb):].strip()
    return ""


class PlaceMemory:
    """What one episode has seen where.

    Args:
        table: the text table (texts and their content words).
        task: row id of the episode's task text.
    """

    def __init__(self, table: TextTable, task: int) -> None:
        self.table, self.task_words = table, table.words(task)
        self.seen: dict[str, bool] = {}  # place -> a task word was in its last description

    def visit(self, command: int, observation: int) -> None:
        """Record the feedback ``observation`` (row id) of the command just issued (row id);
        only "go to X" and "open X" describe a place."""
        place = place_of(self.table.texts[command])
        if place:
            shown = self.table.words(observation) - self.table.words(command)
            self.seen[place] = bool(shown & self.task_words)

    def buckets(self, commands: np.ndarray) -> np.ndarray:
        """int64 ``[N]`` for command row ids ``[N]`` (0: padding): ``TASK_WORD_SEEN`` or
        ``NOTHING_SEEN`` for "go to X" where X was looked at, else ``NOT_LOOKED``."""
        out = np.zeros(len(commands), np.int64)
        if not self.seen:
            return out
        for i, row in enumerate(commands):
            if row:
                place = place_of(self.table.texts[int(row)], ("go to ",))
                if place in self.seen:
                    out[i] = TASK_WORD_SEEN if self.seen[place] else NOTHING_SEEN
        return out


def place_buckets(table: TextTable, task: torch.Tensor, observation: torch.Tensor,
                  previous_command: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
    """The place buckets of collated episodes, as the env wrapper gave them step by step.

    Args:
        table: the text table.
        task, observation, previous_command: int64 ``[B, T]`` row ids (each row one episode
            from its first step; padding 0).
        commands: int64 ``[B, T, N]`` row ids.

    Returns:
        int64 ``[B, T, N]`` (see :meth:`PlaceMemory.buckets`).
    """
    task, observation = task.cpu().numpy(), observation.cpu().numpy()
    previous, rows = previous_command.cpu().numpy(), commands.cpu().numpy()
    out = np.zeros(rows.shape, np.int64)
    for b in range(rows.shape[0]):
        memory = PlaceMemory(table, int(task[b, 0]))
        for t in range(rows.shape[1]):
            if previous[b, t]:
                memory.visit(int(previous[b, t]), int(observation[b, t]))
            out[b, t] = memory.buckets(rows[b, t])
    return torch.from_numpy(out)
