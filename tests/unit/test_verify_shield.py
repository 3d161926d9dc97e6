"""Shields: projection hand cases, forbidden boxes, discrete masks and intervention counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentic_rl.verify.shield import ContinuousShield, DiscreteShield
from agentic_rl.verify.spec import PropertySet
from agentic_rl.verify.step_model import (
    AffineStepModel,
    declared_step_model,
    fetch_reach_step_model,
)


def props(*entries) -> PropertySet:
    return PropertySet.model_validate({"parts": {"grip_pos": [0, 3]}, "properties": list(entries)})


BOX = {"name": "ws", "kind": "state_box", "part": "grip_pos", "low": [0, 0, 0], "high": [1, 1, 1]}
LIMITS = {"name": "lim", "kind": "action_box", "low": [-1, -1, -1, -1], "high": [1, 1, 1, 1]}


def test_box_invariant_is_a_clip_in_action_space():
    shield = ContinuousShield(props(BOX, LIMITS), fetch_reach_step_model())
    obs = np.zeros((2, 10))
    obs[:, :3] = [[0.98, 0.5, 0.01], [0.5, 0.5, 0.5]]
    action = np.array([[1.0, 0.2, -1.0, 3.0], [0.5, -0.5, 0.5, 0.0]])
    safe = shield.project(obs, action)
    # env 0: x may move at most 0.02 -> a0 <= 0.4; z at least -0.01 -> a2 >= -0.2; a3 clipped.
    np.testing.assert_allclose(safe[0], [0.4, 0.2, -0.2, 1.0])
    np.testing.assert_allclose(safe[1], action[1])
    assert shield.interventions == 1
    assert shield.metrics()["safety/shield_intervention_rate"] == 0.5


def test_halfspace_projection_is_euclidean():
    plane = {"name": "diag", "kind": "state_halfspace", "part": "grip_pos", "a": [1, 1, 0], "b": 1.0}
    model = AffineStepModel(np.arange(3), np.eye(3), np.eye(3), np.zeros(3))  # next = s + a
    shield = ContinuousShield(props(plane), model)
    safe = shield.project(np.zeros((1, 3)), np.array([[1.0, 1.0, 0.3]]))
    # closest point of {a0 + a1 <= 1} to (1, 1, 0.3) is (0.5, 0.5, 0.3)
    np.testing.assert_allclose(safe, [[0.5, 0.5, 0.3]], atol=1e-9)


def test_halfspace_and_action_bounds_together():
    plane = {"name": "diag", "kind": "state_halfspace", "part": "grip_pos", "a": [1, 1, 0], "b": 1.0}
    limits = {"name": "lim", "kind": "action_box", "low": [-1, -1, -1], "high": [1, 0.2, 1]}
    model = AffineStepModel(np.arange(3), np.eye(3), np.eye(3), np.zeros(3))
    shield = ContinuousShield(props(plane, limits), model)
    safe = shield.project(np.zeros((1, 3)), np.array([[2.0, 2.0, 0.0]]))
    # the box caps a1 at 0.2; then a0 <= 0.8 — the projection onto both is (0.8, 0.2, 0)
    np.testing.assert_allclose(safe, [[0.8, 0.2, 0.0]], atol=1e-6)


def test_forbidden_box_pushes_to_nearest_face():
    nofly = {"name": "nf", "kind": "forbidden_box", "part": "grip_pos",
             "low": [0.4, 0.4, 0.4], "high": [0.6, 0.6, 0.6]}
    model = AffineStepModel(np.arange(3), np.eye(3), np.eye(3), np.zeros(3))
    shield = ContinuousShield(props(nofly), model)
    obs = np.array([[0.3, 0.5, 0.5], [0.0, 0.0, 0.0]])
    safe = shield.project(obs, np.array([[0.15, 0.0, 0.0], [0.1, 0.1, 0.1]]))
    assert safe[0, 0] == pytest.approx(0.1, abs=1e-6)   # stops at the x = 0.4 face
    np.testing.assert_allclose(safe[0, 1:], [0.0, 0.0])
    np.testing.assert_allclose(safe[1], [0.1, 0.1, 0.1])  # never reaches the box: untouched
    assert shield.interventions == 1 and shield.infeasible == 0


def test_infeasible_state_moves_as_far_back_as_possible():
    shield = ContinuousShield(props(BOX, LIMITS), fetch_reach_step_model())
    obs = np.zeros((1, 10))
    obs[0, :3] = [1.3, 0.5, 0.5]  # 0.3 outside; one step can move back only 0.05
    safe = shield.project(obs, np.array([[0.0, 0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(safe, [[-1.0, 0.0, 0.0, 0.0]])
    assert shield.infeasible == 1


def test_without_model_only_clips_and_needs_no_obs():
    shield = ContinuousShield(props(LIMITS))
    safe = shield.project(None, np.array([[2.0, -3.0, 0.5, 0.0]]))
    np.testing.assert_allclose(safe, [[1.0, -1.0, 0.5, 0.0]])


def test_observation_shape_is_checked():
    shield = ContinuousShield(props(BOX, LIMITS), fetch_reach_step_model())
    with pytest.raises(ValueError, match=r"observations \[1, 10\]"):
        shield.project(np.zeros((1, 13)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="one-step model needs observations"):
        shield.project(None, np.zeros((1, 4)))


def test_model_must_predict_constrained_entries():
    model = AffineStepModel(np.arange(2), np.eye(2, 3), np.eye(2, 3), np.zeros(2))
    with pytest.raises(ValueError, match=r"obs entries \[2\]"):
        ContinuousShield(props(BOX), model)


def test_discrete_shield_masks_and_counts():
    shield = DiscreteShield(PropertySet.model_validate({"properties": [
        {"name": "a", "kind": "forbidden_actions", "actions": [1, 3]},
        {"name": "c", "kind": "forbidden_commands", "patterns": ["^drop "]}]}))
    assert shield.action_mask(4).tolist() == [True, False, True, False]
    assert shield.command_mask(["drop knife", "take knife"]).tolist() == [False, True]
    logits = torch.tensor([[0.0, 5.0, 1.0, 0.0], [3.0, 0.0, 1.0, 0.0]])
    masked = shield.mask_logits(logits)
    assert masked.argmax(-1).tolist() == [2, 0]
    assert torch.isinf(masked[:, [1, 3]]).all()
    assert shield.interventions == 1
    safe = shield.filter_actions(np.array([3, 0]), np.array([[0, 0, 9, 1], [0, 0, 0, 0]]), 4)
    assert safe.tolist() == [2, 0]
    assert shield.metrics()["safety/shield_interventions"] == 2.0
    with pytest.raises(ValueError, match="every one of the 2 actions"):
        DiscreteShield(PropertySet.model_validate({"properties": [
            {"name": "a", "kind": "forbidden_actions", "actions": [0, 1]}]})).action_mask(2)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1))
@example(455)   # thin feasible sets where Dykstra needed ~50,000 sweeps
@example(4825)
def test_projection_is_feasible_and_no_farther_than_any_sampled_safe_action(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=3)
    plane = {"name": "p", "kind": "state_halfspace", "part": "grip_pos", "a": a.tolist(),
             "b": float(rng.normal())}
    box = {"name": "b", "kind": "state_box", "part": "grip_pos", "low": [-1.0, -1.0, -1.0],
           "high": [1.0, 1.0, 1.0]}
    limits = {"name": "l", "kind": "action_box", "low": [-1.0] * 3, "high": [1.0] * 3}
    action_matrix = rng.normal(size=(3, 3)) * 0.3
    model = AffineStepModel(np.arange(3), np.eye(3), action_matrix, np.zeros(3))
    shield = ContinuousShield(props(plane, box, limits), model)
    obs = rng.uniform(-0.5, 0.5, size=(1, 3))
    proposed = rng.uniform(-2, 2, size=(1, 3))
    safe = shield.project(obs, proposed)
    candidates = rng.uniform(-1, 1, size=(10_000, 3))
    nxt = obs + candidates @ action_matrix.T
    feasible = (np.abs(nxt) <= 1).all(1) & (nxt @ a <= plane["b"])
    if shield.infeasible:
        assert not feasible.any()
        return
    nxt_safe = obs + safe @ action_matrix.T
    assert (np.abs(safe) <= 1 + 1e-9).all()
    assert (np.abs(nxt_safe) <= 1 + 1e-6).all() and (nxt_safe @ a <= plane["b"] + 1e-6).all()
    if feasible.any():
        best = np.linalg.norm(candidates[feasible] - proposed, axis=1).min()
        assert np.linalg.norm(safe - proposed) <= best + 1e-6


def test_declared_step_models():
    model = declared_step_model("FetchReach-v4", 10, 4)
    state, action = np.zeros((1, 10)), np.array([[1.0, -1.0, 0.5, 1.0]])
    state[0, :3] = [1.3, 0.7, 0.5]
    np.testing.assert_allclose(model.step(state, action)[0, :3], [1.35, 0.65, 0.525])
    assert declared_step_model("PointMaze_UMaze-v3", 4, 2) is None
