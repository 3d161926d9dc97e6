"""gymnasium-robotics mazes through the goal-conditioned interface."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_rl.envs.mazes import SUCCESS_RADIUS, is_success, make_maze, register_maze_envs


@pytest.mark.parametrize("name", ["PointMaze_UMaze-v3", "PointMaze_Medium-v3",
                                  "PointMaze_Large-v3", "PointMaze_Large_Diverse_GR-v3",
                                  "AntMaze_UMaze-v5", "AntMaze_Medium-v5",
                                  "AntMaze_Open_Diverse_G-v5"])
def test_mazes_pass_checker_and_expose_goal_interface(name):
    env = make_maze(name)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert obs["observation"].dtype == np.float32 and "is_success" in info
    achieved = np.stack([obs["desired_goal"], obs["desired_goal"] + 1.0])
    desired = np.stack([obs["desired_goal"], obs["desired_goal"]])
    np.testing.assert_array_equal(env.compute_reward(achieved, desired, {}), [1.0, 0.0])
    obs, reward, term, trunc, info = env.step(env.action_space.sample())
    assert reward == float(info["is_success"])


def test_success_terminates_episode_by_default():
    env = make_maze("PointMaze_UMaze-v3")
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    base.goal = obs["achieved_goal"].astype(np.float64)  # put the goal under the ball
    obs, reward, term, trunc, info = env.step(np.zeros(2, np.float32))
    assert reward == 1.0 and term and not trunc and info["is_success"]


def test_is_success_radius_and_registration():
    assert is_success(np.zeros(2), np.array([SUCCESS_RADIUS - 1e-3, 0.0]))
    assert not is_success(np.zeros(2), np.array([SUCCESS_RADIUS + 1e-3, 0.0]))
    register_maze_envs()
    register_maze_envs()
    env = gym.make("agentic_rl/PointMaze_UMaze-v3", max_episode_steps=20)
    env.reset(seed=0)
    for _ in range(20):
        _, _, term, trunc, _ = env.step(np.zeros(2, np.float32))
    assert trunc and not term


def test_observe_position_appends_the_ants_xy():
    plain, with_xy = make_maze("AntMaze_UMaze-v5"), make_maze("AntMaze_UMaze-v5",
                                                             observe_position=True)
    check_env(with_xy, skip_render_check=True)
    size = plain.observation_space["observation"].shape[0]
    assert with_xy.observation_space["observation"].shape == (size + 2,)
    obs, _ = with_xy.reset(seed=0)
    reference, _ = plain.reset(seed=0)
    np.testing.assert_array_equal(obs["observation"][:size], reference["observation"])
    np.testing.assert_array_equal(obs["observation"][size:], obs["achieved_goal"])
    obs, *_ = with_xy.step(np.zeros(8, np.float32))
    np.testing.assert_array_equal(obs["observation"][size:], obs["achieved_goal"])


def test_an_ant_out_of_its_healthy_range_ends_the_episode_only_when_asked():
    from agentic_rl.envs.goal import goal_functions

    def lifted_step(env) -> tuple[bool, dict]:
        env.reset(seed=0)
        ant = env.unwrapped.ant_env
        qpos = ant.data.qpos.copy()
        qpos[2] = 1.5  # torso high above Ant-v5's healthy range (0.2, 1.0): a jump
        ant.set_state(qpos, ant.data.qvel.copy())
        _, _, terminated, _, info = env.step(np.zeros(8, np.float32))
        return terminated, info

    strict = make_maze("AntMaze_UMaze-v5", terminate_when_unhealthy=True)
    terminated, info = lifted_step(strict)
    assert terminated and info["unhealthy"] and not info["is_success"]
    assert goal_functions(strict).terminates_on_failure
    plain = make_maze("AntMaze_UMaze-v5")
    terminated, info = lifted_step(plain)
    assert not terminated and "unhealthy" not in info
    assert not goal_functions(plain).terminates_on_failure
    strict.reset(seed=0)
    _, _, terminated, _, _ = strict.step(np.zeros(8, np.float32))  # standing: goes on
    assert not terminated
    with pytest.raises(ValueError, match="only the ant"):
        make_maze("PointMaze_UMaze-v3", terminate_when_unhealthy=True)


def test_the_ant_maze_can_end_an_episode_when_the_ant_turns_onto_its_back():
    from agentic_rl.envs.goal import goal_functions
    from agentic_rl.envs.mazes import torso_up_z

    assert torso_up_z(np.array([1.0, 0, 0, 0])) == 1.0  # upright
    assert torso_up_z(np.array([0.0, 1.0, 0, 0])) == -1.0  # half a turn about x: on its back
    assert torso_up_z(np.array([np.cos(np.pi / 8), 0, np.sin(np.pi / 8), 0])) > 0  # 45 degrees

    def step_on_its_back(env) -> tuple[bool, dict]:
        env.reset(seed=0)
        ant = env.unwrapped.ant_env
        qpos = ant.data.qpos.copy()
        qpos[2], qpos[3:7] = 0.5, [0.0, 1.0, 0.0, 0.0]  # inside the healthy height, upside down
        ant.set_state(qpos, np.zeros_like(ant.data.qvel))
        _, _, terminated, _, info = env.step(np.zeros(8, np.float32))
        return terminated, info

    flips = make_maze("AntMaze_UMaze-v5", terminate_when_flipped=True)
    terminated, info = step_on_its_back(flips)
    assert terminated and info["flipped"] and goal_functions(flips).terminates_on_failure
    terminated, info = step_on_its_back(make_maze("AntMaze_UMaze-v5",
                                                  terminate_when_unhealthy=True))
    assert not terminated and "flipped" not in info  # the height alone misses a roll
    flips.reset(seed=0)
    assert not flips.step(np.zeros(8, np.float32))[2]  # standing: goes on
    with pytest.raises(ValueError, match="only the ant"):
        make_maze("PointMaze_UMaze-v3", terminate_when_flipped=True)
