"""``agentic-rl verify`` with a malformed property or region file: one ``error:`` line."""

from __future__ import annotations

import pytest
import yaml

from agentic_rl.cli import main
from agentic_rl.config import validate_config
from agentic_rl.train.run import train

TINY = {"algorithm": {"name": "sac", "batch_size": 16, "hidden_sizes": [8, 8]},
        "environment": {"name": "agentic_rl/PointReach-v0"},
        "training": {"total_timesteps": 40, "learning_starts": 20, "eval_freq": 40,
                     "num_eval_episodes": 1, "checkpoint_freq": 40}}
REGION = {"center": [0.0, 0.0, 0.5, 0.5], "radius": 0.01}  # [observation (2), goal (2)]
CASES = {
    "action box of the wrong length": (
        {"region": REGION, "properties": [
            {"name": "short", "kind": "action_box", "low": [-1], "high": [1]}]},
        "its action box has 1 entries but the policy has 2 actions"),
    "state property without a horizon": (
        {"parts": {"pos": [0, 2]}, "region": REGION, "properties": [
            {"name": "stay", "kind": "state_box", "part": "pos", "low": [-2, -2],
             "high": [2, 2]}]},
        "give a horizon"),
    "region of the wrong length": (
        {"region": {"center": [0.0, 0.0], "radius": 0.01}, "properties": [
            {"name": "ok", "kind": "action_box", "low": [-1, -1], "high": [1, 1]}]},
        "the region has 2 entries but the policy takes 4 raw inputs"),
    "a part beyond the inputs": (
        {"parts": {"far": [6, 8]}, "horizon": 3, "region": REGION, "properties": [
            {"name": "stay", "kind": "state_box", "part": "far", "low": [-2, -2],
             "high": [2, 2]}]},
        "part 'far' is obs[6:8] but the policy's inputs have only 4 entries"),
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify") / "run"
    train(validate_config(TINY), folder, show_progress=False)
    return folder


@pytest.mark.parametrize("case", CASES)
def test_malformed_property_files_are_one_line(run_dir, tmp_path, capsys, case):
    content, message = CASES[case]
    path = tmp_path / "properties.yaml"
    path.write_text(yaml.safe_dump(content))
    assert main(["verify", str(run_dir), "--property", str(path), "--json",
                 str(tmp_path / "report.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and message in err, err
