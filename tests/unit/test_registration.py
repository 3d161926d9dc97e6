"""``import agentic_rl`` registers every env id, cheaply (no env module is imported)."""

from __future__ import annotations

import subprocess
import sys

from agentic_rl.envs.registration import GRID_IDS, MAZE_IDS, POINT_ID


def test_import_registers_every_env_without_loading_env_modules():
    code = (
        "import sys, gymnasium as gym, agentic_rl\n"
        f"ids = {sorted([*GRID_IDS, *MAZE_IDS, POINT_ID, 'agentic_rl/ALFWorld-v0'])!r}\n"
        "missing = [i for i in ids if i not in gym.registry]\n"
        "heavy = [m for m in ('gymnasium_robotics', 'alfworld', 'torch', 'agentic_rl.envs.mazes')"
        " if m in sys.modules]\n"
        "env = gym.make('agentic_rl/KeyDoor-v0')\n"
        "obs, _ = env.reset(seed=0)\n"
        "print(missing, heavy, sorted(obs))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[] [] ['achieved_goal', 'desired_goal', 'observation']"
