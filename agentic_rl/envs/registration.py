"""Gymnasium ids of this project's envs, registered when ``agentic_rl`` is imported (as
gymnasium_robotics and minigrid do). Entry points are strings, so registering imports no env
module: ``gym.make("agentic_rl/KeyDoor-v0")`` loads the grid world code only then."""

from __future__ import annotations

import gymnasium as gym

GRID_IDS = {
    "agentic_rl/GridWorld-v0": {"layout": "open", "size": 8, "max_episode_steps": 50},
    "agentic_rl/FourRooms-v0": {"layout": "fourrooms", "max_episode_steps": 100},
    "agentic_rl/KeyDoor-v0": {"layout": "keydoor", "max_episode_steps": 200},
    "agentic_rl/KeyDoorLarge-v0": {"layout": "keydoor_large", "max_episode_steps": 300},
}
MAZE_IDS: dict[str, str] = {
    "agentic_rl/PointMaze_UMaze-v3": "PointMaze_UMaze-v3",
    "agentic_rl/PointMaze_Medium-v3": "PointMaze_Medium-v3",
    "agentic_rl/PointMaze_Large-v3": "PointMaze_Large-v3",
    "agentic_rl/AntMaze_UMaze-v5": "AntMaze_UMaze-v5",
}
POINT_ID = "agentic_rl/PointReach-v0"
ALFWORLD_ID = "agentic_rl/ALFWorld-v0"


def register_envs() -> None:
    """Register every ``agentic_rl/...`` id with Gymnasium (idempotent)."""
    def register(env_id: str, entry_point: str, **options) -> None:
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, **options)

    register(POINT_ID, "agentic_rl.envs.point:PointReachEnv", max_episode_steps=20)
    for env_id, kwargs in GRID_IDS.items():
        register(env_id, "agentic_rl.envs.gridworld:GridWorldEnv", kwargs=kwargs)
    for env_id, name in MAZE_IDS.items():
        register(env_id, "agentic_rl.envs.mazes:make_maze", kwargs={"name": name})
    register(ALFWORLD_ID, "agentic_rl.envs.alfworld.gym_env:ALFWorldEnv",
             disable_env_checker=True)
