"""Scripted experts for the Fetch tasks (position control: an action moves the gripper by
``0.05 * action[:3]`` metres per step; ``action[3]`` opens (+1) or closes (-1) the fingers).

Observation layout (gymnasium-robotics ``fetch_env._get_obs``): ``grip_pos = obs[0:3]``; for the
object tasks ``object_pos = obs[3:6]``.
"""

from __future__ import annotations

import numpy as np

STEP = 0.05  # metres per unit action (gymnasium-robotics pos_ctrl scaling)


def _move(delta: np.ndarray, gain: float) -> np.ndarray:
    return np.clip(delta * gain / STEP, -1.0, 1.0)


def reach_expert(gain: float = 1.0):
    """Move the gripper straight to the goal; ``gain`` < 1 moves more slowly."""

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        delta = obs["desired_goal"] - obs["observation"][:3]
        return np.append(_move(delta, gain), 0.0).astype(np.float32)

    return act


def push_expert(gain: float = 1.0, behind: float = 0.06, hover: float = 0.05,
                contact: float = 0.045):
    """Get behind the block (on the far side from the goal), lower to it, push it to the goal.

    Re-plans every step from the block's current position, so a block pushed off line is
    approached again from behind.
    """

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        grip, block, goal = obs["observation"][:3], obs["observation"][3:6], obs["desired_goal"]
        to_goal = goal[:2] - block[:2]
        distance = np.linalg.norm(to_goal)
        direction = to_goal / max(distance, 1e-6)
        start = np.append(block[:2] - direction * behind, block[2])
        rel = grip[:2] - block[:2]
        along, across = rel @ direction, abs(rel[0] * direction[1] - rel[1] * direction[0])
        lined_up = along < -0.02 and across < 0.015
        if lined_up and abs(grip[2] - block[2]) < 0.02:
            target = np.append(goal[:2] - direction * contact, block[2])  # push the block to goal
        elif np.linalg.norm(grip[:2] - start[:2]) < 0.01:
            target = start  # above/at the start point: descend
        else:
            target = np.append(start[:2], block[2] + hover)  # travel above the block
            if grip[2] < block[2] + hover - 0.01 and not lined_up:
                target = np.append(grip[:2], block[2] + hover)  # lift first, never sweep it
        return np.append(_move(target - grip, gain), -1.0).astype(np.float32)

    return act


def pick_and_place_expert(gain: float = 1.0):
    """Open above the block, descend, close, then carry the block to the goal."""

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        grip, block, goal = obs["observation"][:3], obs["observation"][3:6], obs["desired_goal"]
        finger_width = obs["observation"][9] + obs["observation"][10]
        horizontal = np.linalg.norm(grip[:2] - block[:2])
        held = horizontal < 0.02 and abs(grip[2] - block[2]) < 0.02 and finger_width < 0.06
        if held:
            return np.append(_move(goal - grip, gain), -1.0).astype(np.float32)
        if horizontal > 0.01:
            target = np.append(block[:2], block[2] + 0.05)
            return np.append(_move(target - grip, gain), 1.0).astype(np.float32)
        if grip[2] - block[2] > 0.005:
            return np.append(_move(block - grip, gain), 1.0).astype(np.float32)
        return np.array([0.0, 0.0, 0.0, -1.0], dtype=np.float32)  # close the fingers

    return act
