"""Property files, vectorised violation checks and the run-time monitor."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.spec import PropertyError, load_properties, load_region

PROPERTY_FILE = """
parts: {grip_pos: [0, 3]}
properties:
  - {name: workspace, kind: state_box, part: grip_pos, low: [0, 0, 0], high: [1, 1, 1]}
  - {name: above_table, kind: state_halfspace, part: grip_pos, a: [0, 0, -1], b: -0.2}
  - {name: no_fly, kind: forbidden_box, part: grip_pos, low: [0.4, 0.4, 0.4], high: [0.6, 0.6, 0.6]}
  - {name: limits, kind: action_box, low: [-1, -1], high: [1, 1]}
"""


def write(tmp_path, text: str, name: str = "props.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_state_and_action_violations_vectorised(tmp_path):
    props = load_properties(write(tmp_path, PROPERTY_FILE))
    obs = np.array([
        [0.1, 0.1, 0.5, 9.0],    # fine (extra obs entries ignored)
        [1.2, 0.1, 0.5, 0.0],    # outside workspace
        [0.5, 0.5, 0.1, 0.0],    # below z = 0.2
        [0.5, 0.5, 0.5, 0.0],    # inside the forbidden box
        [0.6, 0.6, 0.6, 0.0],    # on its closed boundary: still inside
    ])
    action = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, -1.0], [0.0, -1.01], [1.0, 1.0]])
    masks = props.violations(obs, action)
    assert masks["workspace"].tolist() == [False, True, False, False, False]
    assert masks["above_table"].tolist() == [False, False, True, False, False]
    assert masks["no_fly"].tolist() == [False, False, False, True, True]
    assert masks["limits"].tolist() == [False, True, False, True, False]


def test_unknown_key_error_names_the_key_path(tmp_path):
    text = PROPERTY_FILE.replace("high: [1, 1, 1]}", "high: [1, 1, 1], hihg: 3}")
    with pytest.raises(ValueError, match=r"properties\.0\.state_box\.hihg"):
        load_properties(write(tmp_path, text))
    with pytest.raises(ValueError, match=r"horizn"):
        load_properties(write(tmp_path, "horizn: 3\n" + PROPERTY_FILE))


def test_semantic_errors_name_the_problem(tmp_path):
    bad_part = PROPERTY_FILE.replace("part: grip_pos, a:", "part: gripper, a:")
    with pytest.raises(ValueError, match="unknown part 'gripper'"):
        load_properties(write(tmp_path, bad_part))
    bad_width = PROPERTY_FILE.replace("a: [0, 0, -1]", "a: [0, -1]")
    with pytest.raises(ValueError, match="has 3 entries but the property gives 2"):
        load_properties(write(tmp_path, bad_width))
    with pytest.raises(ValueError, match="not a valid regex"):
        load_properties(write(tmp_path, "properties: [{name: c, kind: forbidden_commands, "
                                         "patterns: ['(']}]"))
    with pytest.raises(PropertyError, match="does not exist"):
        load_properties(tmp_path / "missing.yaml")


def test_discrete_and_command_properties(tmp_path):
    props = load_properties(write(tmp_path, """
properties:
  - {name: no_four, kind: forbidden_actions, actions: [4, 2]}
  - {name: no_heat_cat, kind: forbidden_commands, patterns: ['^heat .*cat']}
"""))
    ints = props.properties[0].violations(np.array([0, 2, 4, 3]))
    assert ints.tolist() == [False, True, True, False]
    cmds = props.properties[1].violations(["heat the cat", "go to cat", "heat bread"])
    assert cmds.tolist() == [True, False, False]


def test_region_forms(tmp_path):
    low, high = load_region(write(tmp_path, "center: [1, 2]\nradius: 0.5\n", "r.yaml")).bounds()
    assert low.tolist() == [0.5, 1.5] and high.tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match="either low and high"):
        load_region(write(tmp_path, "low: [0]\n", "bad.yaml"))


def test_monitor_counts_rates_and_horizon(tmp_path):
    props = load_properties(write(tmp_path, "horizon: 2\n" + PROPERTY_FILE))
    monitor = SafetyMonitor(props)
    obs = np.array([[0.5, 0.5, 0.5], [0.1, 0.1, 0.5], [1.5, 0.5, 0.1]])
    action = np.zeros((3, 2))
    masks = monitor.check(obs, action, episode_step=np.array([0, 1, 1]))
    assert masks["no_fly"].tolist() == [True, False, False]
    # third env breaks workspace and above_table: 3 violations on 2 of 3 env steps
    monitor.check(obs, action, episode_step=np.array([5, 5, 5]))  # past the horizon: ignored
    metrics = monitor.metrics()
    assert metrics["safety/violations"] == 3.0
    assert metrics["safety/violation_rate"] == pytest.approx(2 / 6)
    assert monitor.summary()["per_property"] == {
        "workspace": 1, "above_table": 1, "no_fly": 1, "limits": 0}
    with pytest.raises(ValueError, match="episode_step"):
        monitor.check(obs, action)
    monitor.reset()
    assert monitor.metrics()["safety/violations"] == 0.0


def test_region_can_live_in_the_property_file(tmp_path):
    props = load_properties(write(tmp_path, "region: {center: [0, 1], radius: [0.5, 0.25]}\n"
                                            + PROPERTY_FILE))
    low, high = props.region.bounds()
    assert low.tolist() == [-0.5, 0.75] and high.tolist() == [0.5, 1.25]
    with pytest.raises(ValueError, match=r"region\.radiuss"):
        load_properties(write(tmp_path, "region: {center: [0], radiuss: 1}\n" + PROPERTY_FILE))
