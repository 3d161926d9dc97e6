"""``verify_run``: checkpoint folder + property file -> JSON report (the ``verify`` command)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agentic_rl.algos.sac import SAC, SACConfig
from agentic_rl.data.checkpoint import flatten_state, save_checkpoint
from agentic_rl.verify.runner import format_results, verify_run

torch.set_num_threads(1)

PROPERTIES = """
parts: {grip_pos: [0, 3]}
horizon: 3
region:
  center: [1.34, 0.75, 0.53, 0, 0, 0, 0, 0, 0, 0, 1.30, 0.80, 0.50]
  radius: 0.01
properties:
  - {name: limits, kind: action_box, low: [-1, -1, -1, -1], high: [1, 1, 1, 1]}
  - {name: tight, kind: action_box, low: [-0.001, -1, -1, -1], high: [0.001, 1, 1, 1]}
  - {name: workspace, kind: state_box, part: grip_pos, low: [1.0, 0.4, 0.2], high: [1.7, 1.1, 0.9]}
"""


def make_run(tmp_path):
    """A SAC checkpoint for FetchReach's sizes whose actor breaks "tight" (as ``train`` writes
    it: the whole learner under ``algo``)."""
    torch.manual_seed(0)
    spaces = {"obs_dim": 10, "goal_dim": 3, "act_dim": 4, "action_low": -np.ones(4),
              "action_high": np.ones(4)}
    algo = SAC(SACConfig(hidden_sizes=[32, 32], fused_update=False), spaces)
    with torch.no_grad():
        algo.actor.mean_head.bias.fill_(0.5)  # first action entry near tanh(0.5) ~ 0.46
    algo.observe({"observation": torch.randn(64, 10) * 0.1 + 0.8,
                  "desired_goal": torch.randn(64, 3) * 0.1 + 0.8,
                  "achieved_goal": torch.randn(64, 3) * 0.1 + 0.8})
    tensors, skeleton = flatten_state(algo.state_dict(), "algo")
    config = {"algorithm": {"name": "sac", "hidden_sizes": [32, 32], "activation": "relu"},
              "environment": {"name": "FetchReach-v4", "clip_obs": 5.0,
                              "normalize_obs": True, "normalize_goal": True}}
    save_checkpoint(tmp_path / "run" / "checkpoints", 100, tensors,
                    {"config": config, "algo": skeleton}, {"none": np.zeros(1)})
    (tmp_path / "props.yaml").write_text(PROPERTIES)
    return tmp_path / "run", tmp_path / "props.yaml"


def test_verify_run_writes_a_replayable_report(tmp_path):
    run_dir, props = make_run(tmp_path)
    report, results = verify_run(run_dir, props)
    statuses = {r["name"]: r["status"] for r in report["results"]}
    assert statuses == {"limits": "proved", "tight": "falsified", "workspace": "proved"}
    assert report["step_model"] == "FetchReach-v4"
    assert json.loads((run_dir / "verify.json").read_text()) == report
    tight = next(r for r in results if r.name == "tight")
    assert abs(tight.output_at_counterexample[0]) > 0.001   # the action really breaks the bound
    assert tight.details["replay"]["violates"]  # replayed through the learner's own act
    low, high = np.array(report["region"]["low"]), np.array(report["region"]["high"])
    assert ((low <= tight.counterexample) & (tight.counterexample <= high)).all()
    assert "tight" in format_results(results)


def test_verify_run_needs_a_region_of_the_right_size(tmp_path):
    run_dir, props = make_run(tmp_path)
    (tmp_path / "region.yaml").write_text("center: [0, 0, 0]\nradius: 0.1\n")
    with pytest.raises(ValueError, match="region has 3 entries but the policy takes 13"):
        verify_run(run_dir, props, region_file=tmp_path / "region.yaml")
    props.write_text(PROPERTIES.split("region:")[0] + "properties:" + PROPERTIES.split("properties:")[1])
    with pytest.raises(ValueError, match="no region to verify over"):
        verify_run(run_dir, props)


def test_a_counterexample_that_does_not_replay_becomes_unknown(tmp_path):
    from agentic_rl.verify.replay import deployed_learner, replay
    from agentic_rl.verify.result import VerifyResult
    from agentic_rl.verify.spec import load_properties

    run_dir, props = make_run(tmp_path)
    properties = load_properties(props)
    low, high = properties.region.bounds()
    config = {"algorithm": {"name": "sac", "hidden_sizes": [32, 32]},
              "environment": {"name": "FetchReach-v4"}}
    algo, obs_dim = deployed_learner(config, run_dir / "checkpoints" / "step_000000100")
    outside = (high + 1.0).tolist()  # a claimed counterexample for a property that holds
    claimed = VerifyResult("limits", "falsified", 0.0, counterexample=outside)
    replay([claimed], properties, algo, obs_dim, low, high, env_units=False)
    assert claimed.status == "unknown" and not claimed.details["replay"]["violates"]
    assert (np.asarray(claimed.counterexample) <= high).all()  # moved into the region first
