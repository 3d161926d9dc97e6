"""The progress bar takes at most one update per UPDATE_SECONDS and draws the last on exit."""

from __future__ import annotations

import math

from agentic_rl.train import progress as progress_module
from agentic_rl.train.progress import Progress


def test_updates_are_throttled_and_the_last_one_is_drawn(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    drawn = []
    with Progress(1000) as bar:
        original = bar._bar.update
        monkeypatch.setattr(bar._bar, "update",
                            lambda task, **fields: (drawn.append(fields), original(task, **fields)))
        for step in range(1, 501):
            clock[0] += 0.001  # 1,000 steps/s: 0.5 s in all
            bar.update(step, 0.25 if step > 300 else math.nan)
        assert len(drawn) == 5  # steps 1, 101, 201, 301, 401
        task = bar._bar.tasks[0]
    assert len(drawn) == 6 and task.completed == 500  # the pending step 500, on exit
    assert drawn[-1]["success"] == "0.25" and drawn[0]["success"] == "-"


def test_a_disabled_bar_draws_nothing():
    with Progress(10, enabled=False) as bar:
        bar.update(5, 1.0)
    assert bar._bar is None
