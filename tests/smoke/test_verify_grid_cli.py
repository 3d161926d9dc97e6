"""``agentic-rl verify`` on a grid-world run: properties decided by enumerating every
(start, goal) pair, counterexamples replayed in the env; learners with a memory refused."""

from __future__ import annotations

import json

import pytest
import yaml

from agentic_rl.data.checkpoint import CheckpointError
from agentic_rl.train.run import train
from agentic_rl.verify.runner import verify_run
from tests.smoke.test_family_matrix import LAVA_ROOM, family_config


def test_a_grid_run_is_verified_by_enumeration(tmp_path):
    config = family_config(tmp_path, "ppo", steps=400, environment=LAVA_ROOM)
    train(config, tmp_path / "run", show_progress=False)
    properties = tmp_path / "grid.yaml"
    properties.write_text(yaml.safe_dump({"parts": {"cell": [0, 2]}, "properties": [
        {"name": "lava", "kind": "forbidden_box", "part": "cell", "low": [-0.3, -0.3],
         "high": [-0.1, -0.1]},
        {"name": "anywhere", "kind": "state_box", "part": "cell", "low": [-2, -2],
         "high": [2, 2]},
        {"name": "never_up", "kind": "forbidden_actions", "actions": [0]},
        {"name": "never_any", "kind": "forbidden_actions", "actions": [0, 1, 2, 3]},
        {"name": "gentle", "kind": "action_box", "low": [-1], "high": [1]}]}))
    report, results = verify_run(tmp_path / "run", properties)
    status = {r.name: r.status for r in results}
    assert status["anywhere"] == "proved" and status["never_any"] == "falsified"
    assert status["gentle"] == "unknown" and status["lava"] in ("proved", "falsified")
    assert status["never_up"] in ("proved", "falsified")
    if status["lava"] == "falsified":  # an untrained policy walks into the lava somewhere
        assert report["results"][0]["details"]["replay"]["violates"]
    assert json.loads((tmp_path / "run" / "verify.json").read_text())["counts"]["proved"] >= 1


def test_a_learner_with_memory_is_refused(tmp_path):
    config = family_config(tmp_path, "hgpo", steps=40)
    train(config, tmp_path / "run", show_progress=False)
    properties = tmp_path / "grid.yaml"
    properties.write_text(yaml.safe_dump({"properties": [
        {"name": "never_up", "kind": "forbidden_actions", "actions": [0]}]}))
    with pytest.raises(CheckpointError, match="enumerates grid worlds"):
        verify_run(tmp_path / "run", properties)


def test_a_part_beyond_the_grid_observation_is_one_error(tmp_path):
    from agentic_rl.verify.spec import PropertyError

    train(family_config(tmp_path, "ppo", steps=40, environment=LAVA_ROOM), tmp_path / "run",
          show_progress=False)
    properties = tmp_path / "grid.yaml"
    properties.write_text(yaml.safe_dump({"parts": {"far": [2, 5]}, "properties": [
        {"name": "wall", "kind": "state_box", "part": "far", "low": [0, 0, 0],
         "high": [1, 1, 1]}]}))
    with pytest.raises(PropertyError, match="part 'far'"):
        verify_run(tmp_path / "run", properties)
