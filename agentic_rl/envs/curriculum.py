"""Curricula (SPEC E6): stages declared in the config, advanced when eval success passes a
threshold. A stage sets attributes of the unwrapped env, e.g. Fetch's ``target_range``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class Curriculum:
    """Tracks the current stage; ``apply`` pushes its attributes into envs."""

    def __init__(self, config: Any | None) -> None:
        self.stages = list(config.stages) if config is not None else []
        self.threshold = config.success_threshold if config is not None else 1.0
        self.index = 0

    @property
    def active(self) -> bool:
        return bool(self.stages)

    @property
    def task_id(self) -> str:
        """Name of the current stage ('' without a curriculum)."""
        return self.stages[self.index].name if self.stages else ""

    @property
    def finished(self) -> bool:
        return not self.stages or self.index == len(self.stages) - 1

    def apply(self, env: gym.Env | gym.vector.VectorEnv) -> None:
        """Set the current stage's attributes on ``env`` (or every env of a vector env)."""
        if not self.stages:
            return
        members = env.envs if isinstance(env, gym.vector.SyncVectorEnv) else [env]
        for member in members:
            base = member.unwrapped
            for name, value in self.stages[self.index].env_attrs.items():
                if not hasattr(base, name):
                    raise AttributeError(f"curriculum stage {self.task_id!r} sets {name!r}, "
                                         f"which {type(base).__name__} does not have")
                setattr(base, name, value)

    def maybe_advance(self, success_rate: float) -> bool:
        """Move to the next stage if ``success_rate`` reached the threshold; True if moved."""
        if self.finished or success_rate < self.threshold:
            return False
        self.index += 1
        return True
