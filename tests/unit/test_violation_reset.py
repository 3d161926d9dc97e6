"""``verification.reset_on_violation``: a training episode ends, truncated with its reward
unchanged, at its first step that breaks a property (by hand on PointReach), only in the
training envs, and only where a property file says what a violation is."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from agentic_rl.config import ConfigError, validate_config
from agentic_rl.envs.point import PointReachEnv
from agentic_rl.train.safety import ViolationReset
from agentic_rl.verify.spec import load_properties
from tests.unit.test_lagrangian import _config


def _properties(tmp_path, horizon=None):
    path = tmp_path / "box.yaml"
    spec = {"parts": {"pos": [0, 2]}, "properties": [
        {"name": "box", "kind": "forbidden_box", "part": "pos", "low": [-0.25, -0.25],
         "high": [0.25, 0.25]}]}
    path.write_text(yaml.safe_dump(spec | ({"horizon": horizon} if horizon else {})))
    return load_properties(path)


def _walk_right(env, steps):
    """From x = -0.6 at 0.1 a step: x = -0.5, -0.4, -0.3, -0.2 (in the box), -0.1, ..."""
    env.reset(seed=0)
    env.unwrapped.position = np.array([-0.6, 0.0], np.float32)
    return [env.step(np.array([1.0, 0.0], np.float32)) for _ in range(steps)]


def test_the_first_step_into_the_box_truncates_with_its_reward(tmp_path):
    steps = _walk_right(ViolationReset(PointReachEnv(), _properties(tmp_path)), 4)
    assert [s[3] for s in steps] == [False, False, False, True]  # truncated
    assert [s[2] for s in steps] == [False] * 4  # never terminated
    assert steps[3][4]["violation_reset"] and "violation_reset" not in steps[2][4]
    plain = _walk_right(PointReachEnv(), 4)
    assert [s[1] for s in steps] == [s[1] for s in plain]
    np.testing.assert_allclose(steps[3][0]["observation"], [-0.2, 0.0], atol=1e-6)


def test_a_property_past_its_horizon_resets_nothing(tmp_path):
    env = ViolationReset(PointReachEnv(), _properties(tmp_path, horizon=3))
    assert not any(s[3] for s in _walk_right(env, 5))  # the box is entered at step index 3
    env = ViolationReset(PointReachEnv(), _properties(tmp_path, horizon=4))
    assert [s[3] for s in _walk_right(env, 4)] == [False, False, False, True]


def test_only_the_training_envs_reset(tmp_path):
    from agentic_rl.train.setup import build_envs

    config = _config(tmp_path)
    config = config.model_copy(update={"verification": config.verification.model_copy(
        update={"reset_on_violation": True})})
    envs, eval_env = build_envs(config)
    assert all(isinstance(env, ViolationReset) for env in envs.envs)
    assert not isinstance(eval_env, ViolationReset)
    plain, _ = build_envs(_config(tmp_path))
    assert not any(isinstance(env, ViolationReset) for env in plain.envs)


def test_reset_on_violation_needs_a_property_file_and_a_gymnasium_env():
    with pytest.raises(ConfigError, match="reset_on_violation needs"):
        validate_config({"algorithm": {"name": "sac"},
                         "verification": {"reset_on_violation": True}})
    with pytest.raises(ConfigError, match="reset_on_violation"):
        validate_config({"algorithm": {"name": "text_opd"},
                         "environment": {"name": "agentic_rl/ALFWorld-v0"},
                         "verification": {"property_file": "x.yaml",
                                          "reset_on_violation": True}})
