"""``hgpo_vs_flat.run_all``: after Ctrl-C no queued run starts (real spawned processes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from hgpo_vs_flat import run_all  # noqa: E402


def interrupted_run(job: tuple) -> dict:
    """A run that marks that it started, then stops as a run does on Ctrl-C."""
    folder, index = job
    (Path(folder) / f"started_{index}").touch()
    raise KeyboardInterrupt(f"run {index} interrupted")


def finished_run(job: tuple) -> dict:
    return {"index": job[1]}


def test_no_queued_run_starts_after_the_running_ones_stopped_on_ctrl_c(tmp_path):
    jobs = [(str(tmp_path), index) for index in range(6)]
    with pytest.raises(KeyboardInterrupt):
        run_all(jobs, processes=2, function=interrupted_run)
    started = sorted(path.name for path in tmp_path.iterdir())
    assert 1 <= len(started) <= 2, started  # one per worker at most: the ones Ctrl-C stopped


def test_runs_that_finish_return_in_order(tmp_path):
    jobs = [(str(tmp_path), index) for index in range(4)]
    assert [r["index"] for r in run_all(jobs, processes=2, function=finished_run)] == [0, 1, 2, 3]
