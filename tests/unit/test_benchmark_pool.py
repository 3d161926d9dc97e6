"""``hgpo_vs_flat``: after Ctrl-C no queued run starts (real spawned processes); a run scored
on more final episodes, its result kept in its folder and read back by a later command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import hgpo_vs_flat  # noqa: E402
from hgpo_vs_flat import CONFIGS, run_all, run_job  # noqa: E402


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


def test_a_run_scored_on_more_final_episodes_reports_that_evaluation_and_keeps_it(
        tmp_path, monkeypatch):
    config = yaml.safe_load((CONFIGS / "hgpo_pointmaze.yaml").read_text())
    config["training"] |= {"learning_starts": 200, "eval_freq": 400, "num_eval_episodes": 1,
                           "checkpoint_freq": 400, "log_freq": 200}
    config["environment"]["kwargs"] = {**config["environment"].get("kwargs", {}),
                                       "max_episode_steps": 30}
    job = (config, 0, 400, None, tmp_path / "run", 3)
    result = run_job(job)
    assert result["success_episodes"] == 3 and result["success"] in (0.0, 1 / 3, 2 / 3, 1.0)
    assert result["curve"][-1][0] == 400 and "subgoal_reached_rate" in result
    assert result["learning_steps_per_second"] > 0

    def scored_again(*job):
        return {"success": 0.5, "success_episodes": job[-1]}

    monkeypatch.setattr(hgpo_vs_flat, "run", scored_again)
    # the same command later: read back (as JSON keeps it), not scored again
    assert run_job(job) == json.loads(json.dumps(result))
    assert run_job((config, 0, 400, None, tmp_path / "run", 5))["success_episodes"] == 5
    assert run_job(job)["success_episodes"] == 3  # scored again: the kept one was for 5
    other = {**config, "training": {**config["training"], "eval_freq": 200}}
    assert run_job((other, 0, 400, None, tmp_path / "run", 3)) == {"success": 0.5,
                                                                   "success_episodes": 3}
