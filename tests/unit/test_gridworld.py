"""Grid worlds: layout parsing, dynamics, key-door logic, gymnasium contract, batch stepping."""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_rl.envs.grid_layouts import parse_layout
from agentic_rl.envs.gridworld import (
    BatchGridWorld,
    GridWorldEnv,
    register_envs,
)

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3


def shortest_solution(env: GridWorldEnv) -> int:
    """BFS over (row, col, has_key) from S to G through the env's own dynamics."""
    lay = env.core.layout
    start = (lay.start[0], lay.start[1], False)
    seen, queue = {start: 0}, deque([start])
    while queue:
        r, c, key = queue.popleft()
        if (r, c) == lay.goal:
            return seen[(r, c, key)]
        for action in range(4):
            pos, has = env.core.move(np.array([[r, c]]), np.array([key]), np.array([action]))
            nxt = (int(pos[0, 0]), int(pos[0, 1]), bool(has[0]))
            if nxt not in seen:
                seen[nxt] = seen[(r, c, key)] + 1
                queue.append(nxt)
    return -1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"layout": "open", "size": 5},
        {"layout": "fourrooms"},
        {"layout": "keydoor"},
        {"layout": "keydoor_large"},
        {"layout": "fourrooms", "random_start": True, "random_goal": True},
    ],
)
def test_envs_pass_gymnasium_checker(kwargs):
    check_env(GridWorldEnv(**kwargs), skip_render_check=True)


def test_registered_ids_make_and_step():
    register_envs()
    register_envs()  # idempotent
    for env_id in ["agentic_rl/GridWorld-v0", "agentic_rl/FourRooms-v0", "agentic_rl/KeyDoor-v0",
                   "agentic_rl/KeyDoorLarge-v0"]:
        env = gym.make(env_id)
        obs, _ = env.reset(seed=0)
        assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
        check_env(env.unwrapped, skip_render_check=True)


def test_open_room_walk_to_goal_rewards_and_terminates():
    env = GridWorldEnv(layout="open", size=3, max_episode_steps=10)
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs["achieved_goal"], [-1.0, -1.0])  # first inner cell is (1, 1)
    np.testing.assert_allclose(obs["desired_goal"], [1.0, 1.0])
    rewards = []
    for action in [RIGHT, RIGHT, DOWN]:
        _, r, term, trunc, info = env.step(action)
        rewards.append(r)
        assert not term and not trunc and not info["is_success"]
    obs, r, term, trunc, info = env.step(DOWN)
    assert rewards == [0.0, 0.0, 0.0] and r == 1.0 and term and not trunc and info["is_success"]


def test_walls_block_and_step_limit_truncates_not_terminates():
    env = GridWorldEnv(layout="open", size=3, max_episode_steps=3)
    obs, info = env.reset(seed=0)
    np.testing.assert_array_equal(info["action_mask"], [0, 1, 1, 0])
    before = obs["achieved_goal"].copy()
    obs, _, term, trunc, _ = env.step(UP)
    np.testing.assert_array_equal(obs["achieved_goal"], before)
    env.step(LEFT)
    _, _, term, trunc, _ = env.step(UP)
    assert trunc and not term


def test_compute_reward_is_vectorised_and_matches_step():
    env = GridWorldEnv(layout="fourrooms")
    achieved = env.core.to_coords(np.array([[1, 1], [1, 11], [5, 5]]))
    desired = env.core.to_coords(np.array([[1, 1], [1, 10], [5, 5]]))
    np.testing.assert_array_equal(env.compute_reward(achieved, desired, {}), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(env.compute_reward(achieved[None], desired[None], {}).shape, (1, 3))


def test_keydoor_door_locked_until_key_and_solution_at_least_40_steps():
    env = GridWorldEnv(layout="keydoor")
    lay = env.core.layout
    left_of_door = np.array([[lay.door[0], lay.door[1] - 1]])
    no_key, _ = env.core.move(left_of_door, np.array([False]), np.array([RIGHT]))
    with_key, _ = env.core.move(left_of_door, np.array([True]), np.array([RIGHT]))
    np.testing.assert_array_equal(no_key, left_of_door)
    np.testing.assert_array_equal(with_key[0], lay.door)
    below_key = np.array([[lay.key[0] + 1, lay.key[1]]])
    _, picked = env.core.move(below_key, np.array([False]), np.array([UP]))
    assert picked[0]
    assert shortest_solution(env) == 42
    assert shortest_solution(GridWorldEnv(layout="keydoor_large")) == 50


def test_parse_layout_rejects_bad_maps():
    with pytest.raises(ValueError, match="enclosed"):
        parse_layout(["#S G#", "#####"])
    with pytest.raises(ValueError, match="key"):
        parse_layout(["#####", "#SKG#", "#####"])
    with pytest.raises(ValueError, match="unknown layout characters"):
        parse_layout(["#####", "#SxG#", "#####"])


def test_batch_rows_match_single_envs_and_reset_by_mask():
    kwargs = {"layout": "fourrooms", "random_start": True, "random_goal": True}
    batch = BatchGridWorld(num_envs=3, seed=0, **kwargs)
    obs, info = batch.reset(seed=[5, 6, 7])
    for row, seed in enumerate([5, 6, 7]):  # a row seeded s starts GridWorldEnv(seed=s)'s episode
        single_obs, single_info = GridWorldEnv(**kwargs).reset(seed=seed)
        for key in obs:
            np.testing.assert_array_equal(obs[key][row], single_obs[key])
        np.testing.assert_array_equal(info["action_mask"][row], single_info["action_mask"])


def test_batch_ends_episodes_and_needs_a_reset_before_stepping_them():
    batch = BatchGridWorld(num_envs=2, seed=0, layout="open", size=3, max_episode_steps=5)
    batch.reset(seed=0)
    for a in [[RIGHT, UP], [RIGHT, UP], [DOWN, UP]]:
        batch.step(np.array(a))
    obs, rew, term, trunc, info = batch.step(np.array([DOWN, UP]))
    np.testing.assert_array_equal(rew, [1.0, 0.0])
    np.testing.assert_array_equal(term, [True, False])
    np.testing.assert_allclose(obs["achieved_goal"][0], [1.0, 1.0])  # the true final cell
    with pytest.raises(RuntimeError, match=r"envs \[0\] finished"):
        batch.step(np.array([UP, UP]))
    obs, _ = batch.reset(seed=[3, None], options={"reset_mask": np.array([True, False])})
    np.testing.assert_allclose(obs["achieved_goal"][0], [-1.0, -1.0])  # back at the start
    obs, rew, term, trunc, info = batch.step(np.array([UP, UP]))
    np.testing.assert_array_equal(trunc, [False, True])  # env 1 kept its episode: 5 steps
    assert not term.any()


def test_batch_random_goals_reproducible_from_seed():
    kwargs = {"layout": "fourrooms", "random_start": True, "random_goal": True}
    a = BatchGridWorld(num_envs=64, seed=3, **kwargs).reset()[0]
    b = BatchGridWorld(num_envs=64, seed=3, **kwargs).reset()[0]
    np.testing.assert_array_equal(a["desired_goal"], b["desired_goal"])
    assert not (a["achieved_goal"] == a["desired_goal"]).all(-1).any()
    assert len(np.unique(a["desired_goal"], axis=0)) > 10


def test_random_starts_and_goals_avoid_the_cells_asked():
    import numpy as np

    from agentic_rl.envs.gridworld import BatchGridWorld, GridWorldEnv

    env = GridWorldEnv(layout="open", size=6, random_start=True, random_goal=True,
                       avoid_cells=[[3, 3]])
    batch = BatchGridWorld(num_envs=64, seed=0, layout="open", size=6, random_start=True,
                           random_goal=True, avoid_cells=[[3, 3]])
    seen = set()
    for seed in range(300):
        env.reset(seed=seed)
        seen |= {tuple(env._pos[0]), tuple(env._goal[0])}
    batch.reset(seed=0)
    seen |= {tuple(c) for c in np.concatenate([batch.pos, batch.goal]).tolist()}
    assert (3, 3) not in seen and len(seen) == 35  # every other free cell of the 6x6 room
    with pytest.raises(ValueError, match="not a free cell"):
        GridWorldEnv(layout="open", size=6, avoid_cells=[[0, 0]])
