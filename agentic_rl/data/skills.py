"""Skill manager (SPEC A5): picks, per episode, which skill's prototypes condition the
distillation loss -- by task id, or learned with a UCB1 bandit on episode success."""

from __future__ import annotations

import math
from typing import Any


class SkillManager:
    """Chooses one of ``names`` per episode.

    Args:
        names: skill names (one prototype buffer each).
        mode: ``"task_id"`` (the skill whose ``task_ids`` list the episode's task id, else the
            first) or ``"learned"`` (UCB1 on each skill's episode success rate).
        task_ids: per skill, the task ids it serves (``task_id`` mode).
    """

    def __init__(self, names: list[str], mode: str = "learned",
                 task_ids: dict[str, list[str]] | None = None, exploration: float = 1.0):
        if not names:
            raise ValueError("a skill manager needs at least one skill")
        self.names, self.mode, self.exploration = list(names), mode, exploration
        self.task_ids = task_ids or {}
        self.pulls = {name: 0 for name in names}
        self.successes = {name: 0.0 for name in names}

    def select(self, task_id: str = "") -> str:
        if len(self.names) == 1:
            return self.names[0]
        if self.mode == "task_id":
            for name in self.names:
                if task_id in self.task_ids.get(name, []):
                    return name
            return self.names[0]
        for name in self.names:  # try every skill once, in order
            if self.pulls[name] == 0:
                return name
        total = sum(self.pulls.values())
        return max(self.names, key=lambda n: self.successes[n] / self.pulls[n]
                   + self.exploration * math.sqrt(2 * math.log(total) / self.pulls[n]))

    def feedback(self, name: str, success: bool) -> None:
        self.pulls[name] += 1
        self.successes[name] += float(success)

    def metrics(self) -> dict[str, float]:
        return {f"skills/{n}_success_rate": self.successes[n] / max(self.pulls[n], 1)
                for n in self.names} | {f"skills/{n}_episodes": float(self.pulls[n])
                                        for n in self.names}

    def state_dict(self) -> dict[str, Any]:
        return {"pulls": self.pulls, "successes": self.successes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pulls = {k: int(v) for k, v in state["pulls"].items()}
        self.successes = {k: float(v) for k, v in state["successes"].items()}
