"""Phase skills (issue 22): the pick-and-place phase rule on hand-built states, demonstrations
cut into phase buffers, the learned manager against the rule, and a distillation batch drawn in
the phases' proportions."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.config import ConfigError, validate_config
from agentic_rl.data.phase_skills import PhaseSkills, pick_and_place_phase


def state(grip, block, fingers=0.08) -> torch.Tensor:
    """A raw 25-d Fetch observation with only the parts the rule reads set."""
    obs = torch.zeros(25)
    obs[0:3], obs[3:6] = torch.tensor(grip), torch.tensor(block)
    obs[9] = obs[10] = fingers / 2
    return obs


GOAL = [1.4, 0.8, 0.6]
STATES = torch.stack([
    state([1.0, 0.5, 0.6], [1.3, 0.7, 0.42]),  # reach: gripper far from the block
    state([1.3, 0.7, 0.47], [1.3, 0.7, 0.42]),  # grasp: above the block, fingers open
    state([1.3, 0.7, 0.43], [1.3, 0.7, 0.42], fingers=0.05),  # carry: block held
    state([1.4, 0.8, 0.6], [1.4, 0.8, 0.59], fingers=0.05),  # place: block at the goal
])
GOALS = torch.tensor([GOAL] * 4)


def test_pick_and_place_phases_of_hand_built_states():
    assert pick_and_place_phase(STATES, GOALS).tolist() == [0, 1, 2, 3]


def episode(phases: list[int]) -> dict[str, torch.Tensor]:
    """An episode that visits ``STATES[phases[t]]`` at step t; action t is t."""
    obs = STATES[phases]
    return {"obs": obs, "desired_goal": GOALS[:1].expand(len(phases), 3),
            "achieved_goal": obs[:, 3:6], "action": torch.arange(len(phases)).float()[:, None],
            "reward": torch.zeros(len(phases))}


def test_demonstrations_are_cut_into_phase_buffers_and_teach_the_learned_manager():
    skills = PhaseSkills("pick_and_place", "learned", capacity=1000, sampling="uniform")
    skills.add_episode(episode([0, 0, 1, 2, 2, 2, 3]), "expert", episode_return=-6.0)
    assert {n: len(b) for n, b in skills.prototypes.items()} == {
        "reach": 2, "grasp": 1, "carry": 3, "place": 1}
    carry = skills.prototypes["carry"].episodes[0]
    assert carry["action"].flatten().tolist() == [3.0, 4.0, 5.0]
    nudged = STATES + 0.001  # near, not on, the demonstration states
    assert skills.phase(nudged, GOALS).tolist() == [0, 1, 2, 3]


def test_distillation_batch_follows_the_phases_of_the_learnt_states():
    skills = PhaseSkills("pick_and_place", "rule", capacity=1000, sampling="uniform")
    skills.add_episode(episode([0, 1, 2, 3]), "expert", episode_return=-3.0)
    learnt = STATES[[2, 2, 2, 0]]  # three carry states, one reach state
    batch = skills.prototype_batch(learnt, GOALS, 8, torch.Generator().manual_seed(0))
    assert sorted(batch["action"].flatten().tolist()) == [0.0, 0.0] + [2.0] * 6
    metrics = skills.metrics()
    assert metrics["skills/carry_share"] == 0.75 and metrics["skills/reach_share"] == 0.25
    assert metrics["skills/place_prototypes"] == 1.0


def test_phase_skills_and_named_skills_together_are_one_line_error():
    with pytest.raises(ConfigError, match="cannot be combined with algorithm.skills"):
        validate_config({"algorithm": {
            "name": "opd", "phase_skills": {"task": "pick_and_place"},
            "skills": [{"name": "a", "prototype_data_path": "a.npz"}]}})

