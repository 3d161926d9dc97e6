"""D1 figures of ``hgpo_vs_flat``: the goal-space path of deterministic or sampled episodes
with the Manager's subgoals over the maze's walls, and success curves (mean +- std over
seeds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.algos.hgpo import HGPO
from agentic_rl.algos.hgpo_sac import HGPOSAC
from agentic_rl.train.evaluate import EVAL_SEED_OFFSET, batch_of_one


def phi_traces(algo: HGPO, env: gym.Env, episodes: int = 3):
    """``[(phi(s) [T, 2], Manager goals [K, 2])]`` of sampled episodes, projected to 2-D with
    the principal axes of phi (identity for a 2-D goal space)."""
    traces = []
    for episode in range(episodes):
        obs, info = env.reset(seed=EVAL_SEED_OFFSET + episode)
        state, phis, goals, done, first = None, [], [], False, True
        while not done:
            tensors = {**batch_of_one(obs, info), "is_first": torch.tensor([first])}
            action, state, extras = algo.act(tensors, state, "explore")
            phis.append(algo.phi(tensors)[0])
            if extras["new_goal"][0]:
                goals.append(extras["goal"][0])
            obs, _, term, trunc, info = env.step(action[0].numpy())
            first, done = False, term or trunc
        phi, goal = torch.stack(phis), torch.stack(goals)
        if phi.shape[1] > 2:
            mean = phi.mean(0)
            axes = torch.linalg.svd(phi - mean, full_matrices=False).Vh[:2].T
            phi, goal = (phi - mean) @ axes, (goal - mean) @ axes
        traces.append((phi, goal))
    return traces


def subgoal_traces(algo: HGPOSAC, env: gym.Env, episodes: int = 3):
    """``[(achieved goals [T, 2], subgoals [K, 2], steps the subgoals were set [K], env goal
    [2])]`` of deterministic episodes (SAC levels)."""
    traces = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED_OFFSET + episode)
        state, positions, goals, set_at, done = None, [], [], [], False
        while not done:
            tensors = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
            action, state, extras = algo.act(tensors, state, "deterministic")
            positions.append(tensors["achieved_goal"][0])
            if extras["new_goal"][0]:
                goals.append(extras["goal"][0])
                set_at.append(len(positions) - 1)
            obs, _, term, trunc, _ = env.step(action[0].numpy())
            done = term or trunc
        positions.append(torch.as_tensor(obs["achieved_goal"]))
        traces.append((torch.stack(positions), torch.stack(goals), set_at,
                       torch.as_tensor(obs["desired_goal"])))
    return traces


def draw_maze_walls(ax, env: gym.Env) -> None:
    """The wall cells of a Gymnasium-Robotics maze, as grey squares in (x, y)."""
    maze = getattr(env.unwrapped, "maze", None)
    if maze is None:
        return
    import matplotlib.patches as patches

    size = maze.maze_size_scaling
    for row, cells in enumerate(maze.maze_map):
        for col, cell in enumerate(cells):
            if cell == 1:
                x, y = maze.cell_rowcol_to_xy(np.array([row, col]))
                ax.add_patch(patches.Rectangle((x - size / 2, y - size / 2), size, size,
                                               color="0.8", zorder=0))


def plot_goals(traces, path: Path, grid: bool, env: gym.Env | None = None) -> None:
    """D1: the goal-space trajectory of each episode (lines) and the Manager's goals
    (crosses); grid goals are drawn as (column, row) with rows downwards. SAC-level traces
    also carry each subgoal's step (written beside it) and the env goal (a star), over the
    maze's walls when ``env`` is a maze; the start is a circle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    x, y = (1, 0) if grid else (0, 1)
    if env is not None:
        draw_maze_walls(ax, env)
    for episode, (path_, goal, *more) in enumerate(traces):
        label = f"episode {episode} " + ("phi(s)" if grid else "position")
        line = ax.plot(path_[:, x], path_[:, y], alpha=0.7, label=label)[0]
        color = line.get_color()
        ax.scatter(goal[:, x], goal[:, y], marker="x", color=color, label="subgoals")
        ax.scatter(path_[:1, x], path_[:1, y], marker="o", color=color)
        if more:  # SAC levels: the step each subgoal was set, and the env goal
            set_at, env_goal = more
            for (gx, gy), step in zip(goal[:, [x, y]].tolist(), set_at):
                ax.annotate(str(step), (gx, gy), fontsize=6, color=color,
                            xytext=(2, 2), textcoords="offset points")
            ax.scatter([env_goal[x]], [env_goal[y]], marker="*", s=120, color=color,
                       edgecolors="black", label="env goal")
    if grid:
        ax.invert_yaxis()
    else:
        ax.set_aspect("equal")
    ax.set_xlabel("goal dim 1 (grid: column)" if grid else "x")
    ax.set_ylabel("goal dim 0 (grid: row)" if grid else "y")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_curves(result: dict[str, Any], names: dict[str, str], path: Path) -> None:
    """D1: mean +- std over seeds of the deterministic eval success against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key, config_name in names.items():
        curves = result[key]["curves"]
        length = min(len(c) for c in curves)
        steps = np.array([step for step, _ in curves[0][:length]])
        values = np.array([[v for _, v in c[:length]] for c in curves])
        mean, std = values.mean(0), values.std(0)
        ax.plot(steps, mean, label=f"{key} ({config_name}), {len(curves)} seeds")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval success (deterministic)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
