"""A live progress bar: env steps, steps/s and the last evaluation's success rate."""

from __future__ import annotations

import math
import time

from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


# rich redraws 10 times a second, and each update costs tens of microseconds (its speed is a
# sum over up to 1,000 kept samples): updating on every env step cost 1-2% of a fast loop.
UPDATE_SECONDS = 0.1


class Progress:
    """Context manager around ``rich.progress``; does nothing when ``enabled`` is False. The bar
    takes at most one update per ``UPDATE_SECONDS`` (the last one is drawn on exit)."""

    def __init__(self, total: int, completed: int = 0, enabled: bool = True) -> None:
        self.enabled, self.total, self.completed = enabled, total, completed
        self._bar: RichProgress | None = None
        self._task = None
        self._next_update = 0.0
        self._pending: tuple[int, float] | None = None  # an update not drawn yet

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
        now = time.monotonic()
        if now < self._next_update:
            self._pending = (step, last_success)
            return
        self._next_update, self._pending = now + UPDATE_SECONDS, None
        self._draw(step, last_success)

    def _draw(self, step: int, last_success: float) -> None:
        speed = self._bar.tasks[0].speed
        self._bar.update(self._task, completed=step,
                         speed=f"{speed:.0f}" if speed else "-",
                         success="-" if math.isnan(last_success) else f"{last_success:.2f}")

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            if self._pending is not None:
                self._draw(*self._pending)
            self._bar.__exit__(*exc)
