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
# gymnasium-robotics' sparse point (v3) and ant (v5) mazes: every layout, and for the open,
# medium and large ones the variants whose goals (_Diverse_G) or goals and starts
# (_Diverse_GR) are drawn from several cells
MAZE_LAYOUTS = ("UMaze", "Open", "Open_Diverse_G", "Open_Diverse_GR", "Medium",
                "Medium_Diverse_G", "Medium_Diverse_GR", "Large", "Large_Diverse_G",
                "Large_Diverse_GR")
MAZE_IDS: dict[str, str] = {f"agentic_rl/{name}": name for name in (
    [f"PointMaze_{layout}-v3" for layout in MAZE_LAYOUTS]
    + [f"AntMaze_{layout}-v5" for layout in MAZE_LAYOUTS])}
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
