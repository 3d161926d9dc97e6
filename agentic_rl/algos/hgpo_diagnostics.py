"""Subgoal quality of a Manager / Worker learner in evaluation episodes (SPEC D1).

Does the Manager set waypoints the Worker can reach, along the path it takes, or does it push
its subgoals to the corners of its box and leave the Worker to chase the env goal? Per
subgoal (one period):

* reached: the Worker's achieved goal met the subgoal (the env's success test) at some step of
  the period;
* saturation: the share of the subgoal's coordinates within 2% of the box's width of its edge
  (``|u| >= 0.96`` for the Manager's action ``u`` in ``[-1, 1]``);
* path distance: the distance from the subgoal to the nearest achieved goal of its episode;
* distance: how far the subgoal lies from the achieved goal where it was set (a high reached
  rate means little when the subgoals are where the agent already stands).
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
        self.distances: list[float] = []
        self._active: list[torch.Tensor] = []  # this episode's subgoal at each step [G]
        self._path: list[torch.Tensor] = []  # this episode's achieved goal after each step [G]
        self._set_at: list[int] = []  # the step each of this episode's subgoals was set

    def step(self, extras: dict[str, torch.Tensor], achieved: torch.Tensor,
             next_achieved: torch.Tensor) -> None:
        """One env step of a batch of one: ``extras`` from ``act`` (``new_goal [1]``,
        ``goal`` / ``goal_unit [1, G]``), ``achieved`` / ``next_achieved [1, G]`` the achieved
        goal before and after it."""
        if bool(extras["new_goal"][0]):
            self.distances.append(float((extras["goal"][0].float() - achieved[0].float()).norm()))
            self._set_at.append(len(self._path))
            self.saturated.append(float((extras["goal_unit"][0].abs() >= 1 - 2 * EDGE)
                                        .float().mean()))
        self._active.append(extras["goal"][0])
        self._path.append(next_achieved[0])

    def end_episode(self) -> None:
        """Judge the episode's subgoals (one vectorised success test over its steps)."""
        if self._set_at:
            goals, path = torch.stack(self._active).float(), torch.stack(self._path).float()
            hits = torch.as_tensor(self.success_fn(path, goals)).bool()
            bounds = [*self._set_at, len(self._path)]
            self.reached += [bool(hits[a:b].any()) for a, b in zip(bounds, bounds[1:])]
            starts = goals[self._set_at]
            self.path_distances += torch.cdist(starts, path).min(dim=1).values.tolist()
        self._active, self._path, self._set_at = [], [], []

    def metrics(self) -> dict[str, float]:
        """``subgoal_reached_rate``, ``subgoal_saturation``, ``subgoal_path_distance``,
        ``subgoal_distance``: means over every subgoal set so far (NaN before the first)."""
        def mean(values: list) -> float:
            return float(np.mean(values)) if values else float("nan")

        return {"subgoal_reached_rate": mean(self.reached),
                "subgoal_saturation": mean(self.saturated),
                "subgoal_path_distance": mean(self.path_distances),
                "subgoal_distance": mean(self.distances)}
