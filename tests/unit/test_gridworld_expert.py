"""The scripted grid expert follows shortest paths (through the key and door)."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_rl.envs.gridworld import BatchGridWorld, GridWorldEnv
from agentic_rl.experts.gridworld import GridWorldExpert


@pytest.mark.parametrize("layout, optimal", [("fourrooms", 19), ("keydoor", 42), ("keydoor_large", 50)])
def test_expert_solves_fixed_layouts_in_the_shortest_number_of_steps(layout, optimal):
    env = GridWorldEnv(layout=layout, max_episode_steps=200)
    expert = GridWorldExpert(env.core)
    obs, _ = env.reset(seed=0)
    for step in range(1, 201):
        obs, reward, terminated, truncated, _ = env.step(int(expert.act(obs)[0]))
        if terminated or truncated:
            break
    assert terminated and reward == 1.0 and step == optimal


def test_expert_reaches_random_goals_in_batch():
    env = BatchGridWorld(num_envs=32, seed=0, layout="fourrooms", random_start=True, random_goal=True)
    expert = GridWorldExpert(env.core)
    obs, _ = env.reset(seed=0)
    budget = 40  # longer than any shortest path in FourRooms
    done = np.zeros(32, bool)
    for _ in range(budget):
        obs, _, terminated, truncated, info = env.step(expert.act(obs))
        assert not (truncated & ~done).any()
        done |= terminated
        if done.all():
            break
        obs, _ = env.reset(options={"reset_mask": terminated | truncated})
    assert done.all()
