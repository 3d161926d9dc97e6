"""A live progress bar: env steps, steps/s and the last evaluation's success rate."""

from __future__ import annotations

import math

from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


class Progress:
    """Context manager around ``rich.progress``; does nothing when ``enabled`` is False."""

    def __init__(self, total: int, completed: int = 0, enabled: bool = True) -> None:
        self.enabled, self.total, self.completed = enabled, total, completed
        self._bar: RichProgress | None = None
        self._task = None

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._bar = RichProgress(
                TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[speed]} steps/s"),
                TextColumn("eval success {task.fields[success]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("train", total=self.total, completed=self.completed,
                                            speed="-", success="-")
        return self

    def update(self, step: int, last_success: float) -> None:
        if self._bar is None:
            return
        speed = self._bar.tasks[0].speed
        self._bar.update(self._task, completed=step,
                         speed=f"{speed:.0f}" if speed else "-",
                         success="-" if math.isnan(last_success) else f"{last_success:.2f}")

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
