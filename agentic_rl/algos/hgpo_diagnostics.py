"""Subgoal quality of a Manager / Worker learner in evaluation episodes (SPEC D1).

Does the Manager set waypoints the Worker can reach, along the path it takes, or does it push
its subgoals to the corners of its box and leave the Worker to chase the env goal? Per
subgoal (one period):

* reached: the Worker's achieved goal met the subgoal (the env's success test) at some step of
  the period;
* saturation: the share of the subgoal's coordinates within 2% of the box's width of its edge
  (``|u| >= 0.96`` for the Manager's action ``u`` in ``[-1, 1]``);
* path distance: the distance from the subgoal to the nearest achieved goal of its episode.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

EDGE = 0.02  # share of the box's width that counts as its edge


class SubgoalStats:
    """Accumulates the three measures over the steps of evaluation episodes, one env.

    Args:
        success_fn: ``(achieved [N, G], goal [N, G]) -> [N]`` the env's success test.
    """

    def __init__(self, success_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
        self.success_fn = success_fn
        self.reached: list[bool] = []
        self.saturated: list[float] = []
        self.path_distances: list[float] = []
        self._goals: list[torch.Tensor] = []  # this episode's subgoals [G]
        self._path: list[torch.Tensor] = []  # this episode's achieved goals [G]

    def step(self, extras: dict[str, torch.Tensor], next_achieved: torch.Tensor) -> None:
        """One env step of a batch of one: ``extras`` from ``act`` (``new_goal [1]``,
        ``goal`` / ``goal_unit [1, G]``), ``next_achieved [1, G]`` the achieved goal after it."""
        goal = extras["goal"][0].float()
        if bool(extras["new_goal"][0]):
            self._goals.append(goal)
            self.reached.append(False)
            self.saturated.append(float((extras["goal_unit"][0].abs() >= 1 - 2 * EDGE)
                                        .float().mean()))
        achieved = next_achieved[0].float()
        self._path.append(achieved)
        if not self.reached[-1]:
            self.reached[-1] = bool(self.success_fn(achieved[None], goal[None])[0])

    def end_episode(self) -> None:
        if self._goals:
            goals, path = torch.stack(self._goals), torch.stack(self._path)
            self.path_distances += torch.cdist(goals, path).min(dim=1).values.tolist()
        self._goals, self._path = [], []

    def metrics(self) -> dict[str, float]:
        """``subgoal_reached_rate``, ``subgoal_saturation``, ``subgoal_path_distance``: means
        over every subgoal set so far (NaN before the first)."""
        def mean(values: list) -> float:
            return float(np.mean(values)) if values else float("nan")

        return {"subgoal_reached_rate": mean(self.reached),
                "subgoal_saturation": mean(self.saturated),
                "subgoal_path_distance": mean(self.path_distances)}
