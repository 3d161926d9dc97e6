"""Discrete goal-conditioned grid worlds (SPEC E2): open room, FourRooms and key-door.

Layouts are lists of strings: ``#`` wall, ``.``/space floor, ``S`` start, ``G`` goal, ``K`` key,
``D`` door (passable only once the key has been picked up by stepping on ``K``). Actions are
``0 up, 1 right, 2 down, 3 left``; bumping into a wall (or a locked door) leaves the agent in place.

Observations are dicts: ``observation = [row, col, has_key]``, ``achieved_goal = [row, col]``,
``desired_goal = [row, col]``; coordinates are scaled to [-1, 1] so a Manager's tanh-bounded goal
lives in the same box. The reward is sparse (1 on reaching the goal cell, else 0) and reaching the
goal terminates the episode; hitting the step limit truncates it. ``GridWorldEnv`` steps one grid
and ``BatchGridWorld`` steps many at once with numpy (same transition code, no autoreset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentic_rl.envs.grid_layouts import DELTAS, GridLayout, resolve_layout
from agentic_rl.envs.registration import GRID_IDS
from agentic_rl.envs.registration import register_envs as register_all_ids


class GridCore:
    """Vectorised grid dynamics shared by the single and the batch environment."""

    def __init__(self, layout: GridLayout, avoid_cells: Sequence[Sequence[int]] = ()) -> None:
        self.layout = layout
        height, width = layout.shape
        if min(height, width) < 4:
            raise ValueError(f"layout {height}x{width} too small: need >= 2 inner rows and columns")
        self.avoid_cells = np.asarray(avoid_cells, dtype=np.int64).reshape(-1, 2)
        free = {tuple(cell) for cell in layout.free_cells().tolist()}
        for cell in self.avoid_cells.tolist():
            if tuple(cell) not in free:
                raise ValueError(f"avoid_cells: {cell} is not a free cell of the layout")
        # Inner cells (1 .. H-2) map onto [-1, 1]; the outer wall ring is never occupied.
        self.scale = np.array([2.0 / (height - 3), 2.0 / (width - 3)], dtype=np.float32)
        self.goal_tolerance = float(0.5 * self.scale.min())

    def to_coords(self, cells: np.ndarray) -> np.ndarray:
        """Integer cells ``[..., 2]`` -> float32 coordinates in [-1, 1]."""
        return np.clip((cells - 1) * self.scale - 1.0, -1.0, 1.0).astype(np.float32)

    def blocked(self, targets: np.ndarray, has_key: np.ndarray) -> np.ndarray:
        """Whether each target cell ``[N, 2]`` is a wall or a locked door, ``[N]``."""
        out = self.layout.walls[targets[:, 0], targets[:, 1]]
        if self.layout.door is not None:
            out = out | ((targets == self.layout.door).all(-1) & ~has_key)
        return out

    def move(
        self, pos: np.ndarray, has_key: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Apply actions ``[N]`` to positions ``[N, 2]``; returns new positions and key flags."""
        targets = pos + DELTAS[actions]
        new_pos = np.where(self.blocked(targets, has_key)[:, None], pos, targets)
        if self.layout.key is not None:
            has_key = has_key | (new_pos == self.layout.key).all(-1)
        return new_pos, has_key

    def action_mask(self, pos: np.ndarray, has_key: np.ndarray) -> np.ndarray:
        """Moves that change the position, ``[N, 4]`` bool."""
        targets = pos[:, None, :] + DELTAS[None]
        flat = self.blocked(targets.reshape(-1, 2), np.repeat(has_key, 4))
        return ~flat.reshape(-1, 4)

    def observe(self, pos: np.ndarray, has_key: np.ndarray, goal: np.ndarray) -> dict:
        coords = self.to_coords(pos)
        observation = np.concatenate([coords, has_key[:, None].astype(np.float32)], axis=-1)
        desired = self.to_coords(goal)
        return {"observation": observation, "achieved_goal": coords, "desired_goal": desired}

    def compute_reward(self, achieved: np.ndarray, desired: np.ndarray, info: Any) -> np.ndarray:
        """Sparse reward ``[...]``: 1.0 where achieved and desired goals are the same cell."""
        diff = np.abs(np.asarray(achieved) - np.asarray(desired))
        return np.all(diff < self.goal_tolerance, axis=-1).astype(np.float32)

    def draw_episode(self, random_start: bool, random_goal: bool, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
        """``(start [1, 2], goal [1, 2])`` of a new episode: the layout's cells, or uniform free
        cells (a random start never on the goal)."""
        goal = self.sample_cells(None if random_goal else self.layout.goal, 1, rng)
        pos = self.sample_cells(None if random_start else self.layout.start, 1, rng)
        while random_start and (pos == goal).all():
            pos = self.sample_cells(None, 1, rng)
        return pos, goal

    def sample_cells(self, fixed: tuple[int, int] | None, count: int, rng: np.random.Generator):
        """``fixed`` repeated, or uniform random free cells if ``fixed`` is None; ``[count, 2]``."""
        if fixed is not None:
            return np.tile(np.array(fixed, dtype=np.int64), (count, 1))
        free = self.layout.free_cells()
        if len(self.avoid_cells):  # never a start or goal on these (e.g. a forbidden cell)
            free = free[~(free[:, None, :] == self.avoid_cells[None]).all(-1).any(-1)]
        return free[rng.integers(0, len(free), size=count)].astype(np.int64)


def _spaces(core: GridCore) -> spaces.Dict:
    coords = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    return spaces.Dict(
        {
            "observation": spaces.Box(
                np.array([-1, -1, 0], np.float32), np.ones(3, np.float32), dtype=np.float32
            ),
            "achieved_goal": coords,
            "desired_goal": coords,
        }
    )


class GridWorldEnv(gym.Env):
    """One goal-conditioned grid world.

    Args:
        layout: ``"open"``, ``"fourrooms"``, ``"keydoor"`` or explicit rows.
        size: side of the open room (only for ``layout="open"``).
        max_episode_steps: step limit (truncation).
        random_start: start in a uniformly random free cell instead of ``S``.
        random_goal: goal in a uniformly random free cell instead of ``G``.
        avoid_cells: ``[[row, col], ...]`` free cells random starts and goals never fall on
            (e.g. a lava cell a safety property forbids: a goal there cannot be reached safely).
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        layout: str | Sequence[str] = "fourrooms",
        size: int = 8,
        max_episode_steps: int = 100,
        random_start: bool = False,
        random_goal: bool = False,
        avoid_cells: Sequence[Sequence[int]] = (),
        render_mode: str | None = None,
    ) -> None:
        self.core = GridCore(resolve_layout(layout, size), avoid_cells)
        lay = self.core.layout
        if (lay.start is None and not random_start) or (lay.goal is None and not random_goal):
            raise ValueError("layout lacks 'S' or 'G'; add it or set random_start/random_goal")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        self.max_episode_steps = max_episode_steps
        self.random_start, self.random_goal = random_start, random_goal
        self.render_mode = render_mode
        self.observation_space = _spaces(self.core)
        self.action_space = spaces.Discrete(4)
        self._pos = np.zeros((1, 2), np.int64)
        self._goal = np.zeros((1, 2), np.int64)
        self._has_key = np.zeros(1, bool)
        self._steps = 0

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """Vectorised sparse reward, ``[...]`` float32 (same convention as gymnasium-robotics)."""
        return self.core.compute_reward(achieved_goal, desired_goal, info)

    def action_mask(self) -> np.ndarray:
        """Moves that change the position, ``[4]`` int8."""
        return self.core.action_mask(self._pos, self._has_key)[0].astype(np.int8)

    def _obs(self) -> dict[str, np.ndarray]:
        return {k: v[0] for k, v in self.core.observe(self._pos, self._has_key, self._goal).items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._pos, self._goal = self.core.draw_episode(self.random_start, self.random_goal,
                                                       self.np_random)
        self._has_key = np.zeros(1, bool)
        self._steps = 0
        return self._obs(), {"action_mask": self.action_mask(), "is_success": False}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self._pos, self._has_key = self.core.move(self._pos, self._has_key, np.array([action]))
        self._steps += 1
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None))
        terminated = reward > 0.0
        truncated = self._steps >= self.max_episode_steps and not terminated
        info = {"action_mask": self.action_mask(), "is_success": terminated}
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lay = self.core.layout
        grid = np.where(lay.walls, "#", " ").astype("<U1")
        if lay.key is not None and not self._has_key[0]:
            grid[lay.key] = "K"
        if lay.door is not None:
            grid[lay.door] = "d" if self._has_key[0] else "D"
        grid[tuple(self._goal[0])] = "G"
        grid[tuple(self._pos[0])] = "A"
        return "\n".join("".join(row) for row in grid)


class BatchGridWorld(gym.vector.VectorEnv):
    """``num_envs`` grid worlds stepped together with numpy (no Python loop over envs).

    Runs without autoreset, as the training collector expects: an ended env must be reset
    (``reset(seed=[...], options={"reset_mask": mask})``) before it is stepped again. A row reset
    with seed ``s`` starts the episode ``GridWorldEnv.reset(seed=s)`` starts; rows reset without
    a seed draw from the generator seeded at construction. ``info["is_success"]`` and
    ``info["action_mask"]`` are ``[N]`` / ``[N, 4]`` arrays. Same arguments as ``GridWorldEnv``.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}

    def __init__(self, num_envs: int, seed: int | None = None, **env_kwargs: Any) -> None:
        single = GridWorldEnv(**env_kwargs)
        self.core, self.num_envs = single.core, num_envs
        self.max_episode_steps = single.max_episode_steps
        self.random_start, self.random_goal = single.random_start, single.random_goal
        self.single_observation_space = single.observation_space
        self.single_action_space = single.action_space
        self.observation_space = gym.vector.utils.batch_space(single.observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(single.action_space, num_envs)
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros((num_envs, 2), np.int64)
        self.goal = np.zeros((num_envs, 2), np.int64)
        self.has_key = np.zeros(num_envs, bool)
        self.steps = np.zeros(num_envs, np.int64)
        self.ended = np.zeros(num_envs, bool)

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        return self.core.compute_reward(achieved_goal, desired_goal, info)

    def _reset_row(self, row: int, rng: np.random.Generator) -> None:
        """The same draws as ``GridWorldEnv.reset`` (``GridCore.draw_episode``)."""
        pos, goal = self.core.draw_episode(self.random_start, self.random_goal, rng)
        self.goal[row], self.pos[row] = goal[0], pos[0]
        self.has_key[row], self.steps[row], self.ended[row] = False, 0, False

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict | None = None):
        """Reset the rows of ``options["reset_mask"]`` (every row without one); ``seed`` is one
        int (seeds row ``i`` with ``seed + i``) or one seed (or None) per row."""
        mask = np.ones(self.num_envs, bool) if not options or "reset_mask" not in options \
            else np.asarray(options["reset_mask"], bool)
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        for row in np.flatnonzero(mask):
            rng = self.rng if seeds[row] is None else np.random.default_rng(seeds[row])
            self._reset_row(int(row), rng)
        info = {"action_mask": self.core.action_mask(self.pos, self.has_key)}
        return self.core.observe(self.pos, self.has_key, self.goal), info

    def step(self, actions):
        if self.ended.any():
            raise RuntimeError(f"envs {np.flatnonzero(self.ended).tolist()} finished their "
                               "episodes: reset them (options={'reset_mask': ...}) first")
        actions = np.asarray(actions, dtype=np.int64)
        self.pos, self.has_key = self.core.move(self.pos, self.has_key, actions)
        self.steps += 1
        obs = self.core.observe(self.pos, self.has_key, self.goal)
        reward = self.core.compute_reward(obs["achieved_goal"], obs["desired_goal"], None)
        terminated = reward > 0.0
        truncated = (self.steps >= self.max_episode_steps) & ~terminated
        self.ended = terminated | truncated
        info = {"is_success": terminated.copy(),
                "action_mask": self.core.action_mask(self.pos, self.has_key)}
        return obs, reward, terminated, truncated, info


ENV_IDS = GRID_IDS


def register_envs() -> None:
    """Register the grid worlds with gymnasium (idempotent)."""
    register_all_ids()
