"""Skill selection and curriculum stages."""

from types import SimpleNamespace

import gymnasium as gym
import pytest

from agentic_rl.data.skills import SkillManager
from agentic_rl.envs.curriculum import Curriculum
from agentic_rl.envs.make import make_env


def test_task_id_selection():
    manager = SkillManager(["near", "far"], "task_id", {"far": ["stage2"]})
    assert manager.select("stage2") == "far"
    assert manager.select("stage1") == "near"


def test_learned_selection_converges_to_the_better_skill():
    manager = SkillManager(["bad", "good"], "learned")
    picks = []
    for _ in range(200):
        skill = manager.select()
        picks.append(skill)
        manager.feedback(skill, success=(skill == "good"))
    assert picks[:2] == ["bad", "good"]
    assert picks[-50:].count("good") >= 45


def test_curriculum_applies_stages_and_advances_on_threshold():
    stages = [SimpleNamespace(name="near", env_attrs={"target_range": 0.05}),
              SimpleNamespace(name="far", env_attrs={"target_range": 0.15})]
    curriculum = Curriculum(SimpleNamespace(stages=stages, success_threshold=0.8))
    env = make_env("FetchReach-v4")
    curriculum.apply(env)
    assert env.unwrapped.target_range == 0.05 and curriculum.task_id == "near"
    assert not curriculum.maybe_advance(0.7)
    assert curriculum.maybe_advance(0.8)
    curriculum.apply(env)
    assert env.unwrapped.target_range == 0.15 and curriculum.finished
    assert not curriculum.maybe_advance(1.0)


def test_curriculum_rejects_unknown_attributes():
    stage = SimpleNamespace(name="s", env_attrs={"no_such_attribute": 1})
    curriculum = Curriculum(SimpleNamespace(stages=[stage], success_threshold=0.5))
    with pytest.raises(AttributeError, match="no_such_attribute"):
        curriculum.apply(gym.make("agentic_rl/PointReach-v0"))
