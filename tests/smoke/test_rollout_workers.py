"""``training.rollout_workers``: every family trains through Ray actors on a real local Ray
(started and stopped here, loopback only), a worker killed with ``kill -9`` is restarted and
the run finishes, and a run with workers resumes from its checkpoint."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from tests.smoke.test_family_matrix import FAMILIES, ON_POLICY, family_config

ray = pytest.importorskip("ray", reason="rollout workers need the [ray] extra")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    from agentic_rl.train.ray_session import ray_session

    with ray_session(None):
        yield


def worker_config(tmp_path, family: str, steps: int = 200, **training):
    sync = {} if family in ON_POLICY else {"weight_sync_every": 40}
    return family_config(tmp_path, family, steps, training={
        "rollout_workers": 2, **sync, **training})


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_trains_with_two_workers(tmp_path, family):
    summary = train(worker_config(tmp_path, family), tmp_path / "run", show_progress=False)
    assert summary["env_steps"] == 200
    assert summary["rollout_workers"] == {"restarts": 0, "lost_chunks": 0}
    series = read_metrics(tmp_path / "run" / "metrics.csv")
    assert "rollout/ep_len_mean" in series and "workers/restarts" in series


def test_curriculum_stage_reaches_the_workers(tmp_path):
    curriculum = {"success_threshold": 0.0, "stages": [
        {"name": "near", "env_attrs": {"goal_range": 0.2}},
        {"name": "far", "env_attrs": {"goal_range": 1.0}}]}
    config = family_config(tmp_path, "sac", training={"rollout_workers": 1,
                                                      "weight_sync_every": 20},
                           environment={"curriculum": curriculum})
    train(config, tmp_path / "run", show_progress=False)
    stages = read_metrics(tmp_path / "run" / "metrics.csv")["curriculum/stage"]
    assert max(value for _, value in stages) == 1.0


def rollout_worker_pids() -> list[int]:
    """Processes whose title Ray set to ``ray::RolloutWorker...``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    title = handle.read().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(b"ray::RolloutWorker"):
                pids.append(int(entry))
    return pids


def test_a_killed_worker_is_restarted_and_the_run_finishes(tmp_path):
    killed = []

    def kill_a_worker(step, metrics):
        if not killed:
            pids = rollout_worker_pids()
            assert pids, "no rollout worker process found"
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    config = worker_config(tmp_path, "sac", steps=400)
    summary = train(config, tmp_path / "run", show_progress=False, on_evaluation=kill_a_worker)
    assert killed and summary["env_steps"] == 400
    assert summary["rollout_workers"]["restarts"] >= 1
    # at most the chunk in flight and the one queued behind it (none if it died between chunks)
    restarts = summary["rollout_workers"]["restarts"]
    assert summary["rollout_workers"]["lost_chunks"] <= 2 * restarts
    assert killed[0] not in rollout_worker_pids()


def test_a_worker_that_dies_between_chunks_is_seen_restarted(tmp_path):
    """Ray runs a request sent after the death on the restarted actor without an error: the
    new sender's name is what tells the learner its episodes in progress are gone."""
    from agentic_rl.train.rollout_workers import RolloutWorkers
    from agentic_rl.train.setup import build_algo, build_envs

    config = worker_config(tmp_path, "sac")
    envs, eval_env = build_envs(config)
    weights = build_algo(config, eval_env).state_dict()
    envs.close()
    eval_env.close()
    workers = RolloutWorkers(config, 1, first_step=0, depth=1)
    try:
        workers.request(5, weights, "random", 0)
        first, restarted = workers.gather()
        assert restarted == [] and first[0].steps == 5
        ray.kill(workers.handles[0], no_restart=False)  # dies idle; Ray restarts it
        workers.request(5, weights, "random", 0)
        second, restarted = workers.gather()
        assert restarted == [0] and workers.restarts == [1]
        assert second[0].sender != first[0].sender and workers.lost_chunks <= 1
        assert not np.array_equal(second[0].arrays["obs/observation"][0],
                                  first[0].arrays["next_obs/observation"][-1])  # fresh episodes
    finally:
        workers.close()


def test_a_run_with_workers_resumes_from_its_checkpoint(tmp_path):
    train(worker_config(tmp_path, "sac", steps=100), tmp_path / "run", show_progress=False)
    summary = train(worker_config(tmp_path, "sac", steps=200), tmp_path / "run", resume=True,
                    show_progress=False)
    assert summary["env_steps"] == 200
    evaluations = read_metrics(tmp_path / "run" / "metrics.csv")["eval/success_rate"]
    assert [step for step, _ in evaluations] == [100, 200]


def test_an_address_without_workers_is_a_one_line_error(tmp_path):
    from agentic_rl.config import ConfigError

    config = family_config(tmp_path, "sac")
    with pytest.raises(ConfigError, match="set training.rollout_workers=N too"):
        train(config, tmp_path / "run", show_progress=False, address="auto")
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


def test_embedding_store_is_shared_between_processes():
    import numpy as np

    from agentic_rl.train.embedding_store import RayPeers, start_store

    @ray.remote(num_cpus=0)
    def fetch(handle, texts):
        return RayPeers(handle).fetch(texts)

    store = start_store()
    try:
        RayPeers(store).publish(["go to fridge 1"], np.ones((1, 3), np.float32))
        assert ray.get(store.size.remote()) == 1  # after the publish: one caller's calls keep order
        found = ray.get(fetch.remote(store, ["go to fridge 1", "open fridge 1"]))
        assert list(found) == ["go to fridge 1"] and found["go to fridge 1"].tolist() == [1, 1, 1]
    finally:
        ray.kill(store)
