"""``verify_run``: checkpoint folder + property file -> JSON report (the ``verify`` command)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.normalizer import RunningNormalizer
from agentic_rl.data.checkpoint import save_checkpoint
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
    torch.manual_seed(0)
    actor = TanhGaussianActor(13, 4, [32, 32])
    with torch.no_grad():
        actor.mean_head.bias.fill_(0.5)  # first action entry near tanh(0.5) ~ 0.46: breaks "tight"
    obs_norm, goal_norm = RunningNormalizer(10), RunningNormalizer(3)
    obs_norm.update(torch.randn(64, 10) * 0.1 + 0.8)
    goal_norm.update(torch.randn(64, 3) * 0.1 + 0.8)
    tensors = {}
    for name, module in {"actor": actor, "obs_normalizer": obs_norm,
                         "goal_normalizer": goal_norm}.items():
        tensors.update({f"algo.{name}.{k}": v for k, v in module.state_dict().items()})
    config = {"algorithm": {"name": "sac", "activation": "relu"},
              "environment": {"name": "FetchReach-v4", "clip_obs": 5.0,
                              "normalize_obs": True, "normalize_goal": True}}
    save_checkpoint(tmp_path / "run" / "checkpoints", 100, tensors, {"config": config},
                    {"none": np.zeros(1)})
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
    assert "tight" in format_results(results)


def test_verify_run_needs_a_region_of_the_right_size(tmp_path):
    run_dir, props = make_run(tmp_path)
    (tmp_path / "region.yaml").write_text("center: [0, 0, 0]\nradius: 0.1\n")
    with pytest.raises(ValueError, match="region has 3 entries but the policy takes 13"):
        verify_run(run_dir, props, region_file=tmp_path / "region.yaml")
    props.write_text(PROPERTIES.split("region:")[0] + "properties:" + PROPERTIES.split("properties:")[1])
    with pytest.raises(ValueError, match="no region to verify over"):
        verify_run(run_dir, props)
