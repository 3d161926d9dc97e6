"""Exhaustive grid-world checks: a real counterexample unshielded, a proof when shielded."""

from __future__ import annotations

import numpy as np

from agentic_rl.envs.grid_layouts import DELTAS, resolve_layout
from agentic_rl.envs.gridworld import GridCore
from agentic_rl.verify.finite import (
    grid_states_from_obs,
    gridworld_system,
    safe_action_mask,
    verify_finite,
)
from agentic_rl.verify.spec import PropertySet

# open 5x5 room (cells 1..5); the centre cell (3, 3) has coordinates (0, 0) and is forbidden
PROPS = PropertySet.model_validate({"parts": {"pos": [0, 2]}, "properties": [
    {"name": "no_centre", "kind": "forbidden_box", "part": "pos",
     "low": [-0.1, -0.1], "high": [0.1, 0.1]}]})


def greedy_policy(core: GridCore):
    """Moves to the neighbour closest to the goal (Manhattan), ties to the lower action index;
    with a mask, only allowed actions are considered."""
    def policy(obs, allowed):
        pos = np.rint((obs["observation"][:, :2] + 1.0) / core.scale + 1).astype(int)
        goal = np.rint((obs["desired_goal"] + 1.0) / core.scale + 1).astype(int)
        targets = pos[:, None, :] + DELTAS[None]
        walls = core.layout.walls[targets[..., 0], targets[..., 1]]
        score = -np.abs(targets - goal[:, None, :]).sum(-1) - 100.0 * walls
        if allowed is not None:
            score = np.where(allowed, score, -np.inf)
        return score.argmax(-1)
    return policy


def test_unshielded_policy_has_a_replayable_counterexample():
    core = GridCore(resolve_layout("open", 5))
    system = gridworld_system(core, PROPS)
    result = verify_finite(system, greedy_policy(core), max_steps=12)
    assert result.status == "falsified"
    assert result.details["failure_reasons"] == {"forbidden": result.details["failures"]}
    # replay the recorded actions in the real grid dynamics: it must end in the forbidden cell
    state = np.array(result.details["start_state"])[None]
    pos, key = state[:, :2], state[:, 2].astype(bool)
    for action in result.details["actions"]:
        pos, key = core.move(pos, key, np.array([action]))
    assert pos[0].tolist() == [3, 3]
    assert np.array(result.details["trajectory"])[-1, :2].tolist() == [3, 3]


def test_shielded_policy_is_proved_safe_for_every_start_and_goal():
    core = GridCore(resolve_layout("open", 5))
    system = gridworld_system(core, PROPS)
    safe = verify_finite(system, greedy_policy(core), max_steps=12, shield=True,
                         require_goal=False)
    assert safe.status == "proved", safe.details
    assert safe.details["pairs"] == 24 * 24   # 25 cells minus the forbidden one
    # the one-step shield never lets it in, but the greedy policy can then dither: liveness
    # failures only, each a real pair that does not reach its goal
    live = verify_finite(system, greedy_policy(core), max_steps=12, shield=True)
    assert live.status == "falsified"
    assert live.details["failure_reasons"] == {"goal not reached": live.details["failures"]}


def test_safe_action_mask_blocks_only_moves_into_forbidden_states():
    core = GridCore(resolve_layout("open", 5))
    system = gridworld_system(core, PROPS)
    mask = safe_action_mask(system, np.array([[3, 2, 0], [1, 1, 0]]))
    assert mask.tolist() == [[True, False, True, True], [True, True, True, True]]


def test_goal_budget_failure_is_reported():
    core = GridCore(resolve_layout("open", 5))
    result = verify_finite(gridworld_system(core, PROPS), greedy_policy(core), max_steps=2,
                           shield=True)
    assert result.status == "falsified"
    assert "does not reach the goal within 2 steps" in result.details["reason"]


def test_states_recovered_from_observations_drive_the_mask():
    core = GridCore(resolve_layout("keydoor", 0))
    cells = core.layout.free_cells()[:5]
    has_key = np.array([0, 1, 0, 1, 1], bool)
    obs = core.observe(cells, has_key, cells)["observation"]
    states = grid_states_from_obs(core, obs)
    assert states[:, :2].tolist() == cells.tolist()
    assert states[:, 2].tolist() == has_key.astype(int).tolist()
