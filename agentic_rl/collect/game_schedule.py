"""Which game each env slot of a text vector env plays (see ``collect.text_inputs``).

Training (:class:`GroupSchedule`): slot ``s`` plays its ``k``-th episode on a game drawn from
``(seed, k)`` alone, so the schedule needs no state beyond each slot's episode count and a
resumed run replays the same games. The first ``dagger_rounds`` episodes of every slot form
DAgger rounds (``width`` distinct games, labelled by the expert); after them, episode ``k`` of
all slots forms one group batch: ``groups`` games, each played by ``group_size`` neighbouring
slots (the group-relative advantages compare episodes of one game).

Evaluation (:class:`SeedSchedule`): the episode with seed ``base_seed + i`` plays game
``games[i % len(games)]``, whatever was played before.
"""

from __future__ import annotations

import numpy as np


class GroupSchedule:
    """Args:
        games: indices (into the env's game list) to train on.
        groups: games per group batch; ``group_size``: episodes of each.
        dagger_rounds: labelled rounds before the group batches.
        seed: the run's seed.
    """

    def __init__(self, games: list[int], groups: int, group_size: int, dagger_rounds: int,
                 seed: int) -> None:
        if not games:
            raise ValueError("no games left to train on (all are held out)")
        self.games, self.groups, self.group_size = np.asarray(games, np.int64), groups, group_size
        self.dagger_rounds, self.seed = dagger_rounds, seed
        self.width = groups * group_size
        self.started = np.zeros(self.width, np.int64)

    def round_games(self, episode: int) -> np.ndarray:
        """The games of episode number ``episode`` of every slot, ``[width]``."""
        labelled = episode < self.dagger_rounds
        count = self.width if labelled else self.groups
        rng = np.random.default_rng([self.seed, int(labelled), episode])
        chosen = rng.choice(self.games, count, replace=count > len(self.games))
        return chosen if labelled else np.repeat(chosen, self.group_size)

    def assign(self, slot: int, seed: int | None) -> tuple[int, int, bool]:
        """``(game, episode number, labelled by the expert)`` of the slot's next episode."""
        episode = int(self.started[slot])
        self.started[slot] += 1
        return int(self.round_games(episode)[slot]), episode, episode < self.dagger_rounds

    def state(self) -> list[int]:
        """Each slot's current episode number (a restored schedule assigns it again on the
        reset that restarts the slot)."""
        return np.maximum(self.started - 1, 0).tolist()

    def load_state(self, current: list[int]) -> None:
        self.started = np.asarray(current, np.int64)


class SeedSchedule:
    """Evaluation: seed ``base_seed + i`` plays ``games[i % len(games)]``, never labelled."""

    def __init__(self, games: list[int], base_seed: int) -> None:
        if not games:
            raise ValueError("no games to evaluate on")
        self.games, self.base_seed = list(games), base_seed

    def assign(self, slot: int, seed: int | None) -> tuple[int, int, bool]:
        index = (int(seed) - self.base_seed) if seed is not None else 0
        return int(self.games[index % len(self.games)]), index, False
