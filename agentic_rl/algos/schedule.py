"""One model for every scheduled value of a config: OPD's and text OPD's distillation weight
(``opd_alpha``, over gradient updates) and HGPO's cap on the Manager's log std (over env
steps). A plain number is a constant; a mapping is a ``Schedule``."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_rl.algos import losses


class Schedule(BaseModel):
    """``start -> end`` over ``steps`` steps that begin at ``start_step``, linear or
    exponential (constant decay rate; ``start`` and ``end`` > 0); ``start`` before, ``end``
    after. What a step counts (updates, env steps) is said by the key that holds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schedule: Literal["linear", "exponential"] = "linear"
    start: float
    end: float
    steps: int = Field(ge=1)
    start_step: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _positive_for_exponential(self) -> Schedule:
        if self.schedule == "exponential" and (self.start <= 0 or self.end <= 0):
            raise ValueError("an exponential schedule needs start > 0 and end > 0")
        return self

    def value(self, step: int) -> float:
        return losses.scheduled_value(self.start, self.end, self.steps, self.schedule,
                                      step - self.start_step)


Scheduled = Union[float, Schedule]  # noqa: UP007 (pydantic reads this alias at run time)


def value_at(value: float | Schedule, step: int) -> float:
    """A constant, or the schedule's value at ``step``."""
    return value.value(step) if isinstance(value, Schedule) else float(value)


def non_negative(value: float | Schedule, name: str) -> float | Schedule:
    """Validator body for weights: a constant or schedule that never goes below zero."""
    low = min(value.start, value.end) if isinstance(value, Schedule) else value
    if low < 0:
        raise ValueError(f"{name} must stay >= 0")
    return value
