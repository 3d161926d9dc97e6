"""How well the Worker of an ``hgpo_sac`` run reaches subgoals on its own, checkpoint by
checkpoint: from the env's start, a subgoal at distance r in a random direction (kept where the
target and the midpoint lie in free maze cells), ``--patience`` periods of deterministic Worker
steps; reached = the env's success test against the subgoal. The Manager plays no part.

    python benchmarks/worker_reach.py RUN_DIR [RUN_DIR ...] --radii 1 2 --trials 40 --json F

Every checkpoint of each run is scored (``--checkpoints step_000050000 ...`` picks some).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.config import validate_config  # noqa: E402
from agentic_rl.data.checkpoint import load_learner  # noqa: E402
from agentic_rl.envs.goal import goal_functions  # noqa: E402
from agentic_rl.envs.make import make_env  # noqa: E402
from agentic_rl.train.setup import build_algo  # noqa: E402


def free(maze: Any, xy: np.ndarray) -> bool:
    """Whether point ``xy [2]`` lies in an open cell of a gymnasium-robotics maze."""
    row, col = maze.cell_xy_to_rowcol(xy)
    inside = 0 <= row < len(maze.maze_map) and 0 <= col < len(maze.maze_map[0])
    return inside and maze.maze_map[row][col] != 1


def reachable_target(maze: Any, start: np.ndarray, radius: float,
                     rng: np.random.Generator) -> np.ndarray:
    """A point ``[2]`` at ``radius`` from ``start`` whose cell and midpoint cell are open."""
    for _ in range(200):
        angle = rng.uniform(0, 2 * np.pi)
        target = start + radius * np.array([np.cos(angle), np.sin(angle)])
        if free(maze, target) and free(maze, (start + target) / 2):
            return target.astype(np.float32)
    raise RuntimeError(f"no open point {radius} from {start}")


def score(algo: Any, env: Any, radius: float, trials: int, steps: int) -> dict[str, float]:
    """Reach rate and mean closest distance over ``trials`` subgoals at ``radius``."""
    success = goal_functions(env).success_fn
    rng = np.random.default_rng(0)
    reached, closest = [], []
    for trial in range(trials):
        obs, _ = env.reset(seed=trial)
        start = np.asarray(obs["achieved_goal"], dtype=np.float32)
        goal = torch.as_tensor(reachable_target(env.unwrapped.maze, start, radius, rng))[None]
        best, hit = float("inf"), False
        for _ in range(steps):
            batch = {k: torch.as_tensor(v, dtype=torch.float32)[None] for k, v in obs.items()}
            action, _, _ = algo.worker.act(algo.worker_obs(batch, goal), None, "deterministic")
            obs, _, _, _, _ = env.step(action[0].numpy())
            achieved = torch.as_tensor(obs["achieved_goal"], dtype=torch.float32)[None]
            best = min(best, float((achieved - goal).norm()))
            if bool(success(achieved, goal)[0]):
                hit = True
                break
        reached.append(hit)
        closest.append(best)
    return {"reach_rate": float(np.mean(reached)), "closest_mean": float(np.mean(closest))}


def checkpoints_of(run_dir: Path, names: list[str] | None) -> list[Path]:
    folders = sorted(p for p in (run_dir / "checkpoints").glob("step_*") if p.is_dir())
    return [p for p in folders if names is None or p.name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="hgpo_sac run folders")
    parser.add_argument("--radii", nargs="+", type=float, default=[1.0, 2.0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--patience", type=int, default=2, help="periods per subgoal")
    parser.add_argument("--checkpoints", nargs="*", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows, results = [], []
    for run_dir in args.runs:
        config = validate_config(yaml.safe_load((run_dir / "config.yaml").read_text()))
        if config.algorithm.name != "hgpo_sac":
            raise SystemExit(f"{run_dir}: not an hgpo_sac run ({config.algorithm.name})")
        env = make_env(config.environment.name, config.environment.kwargs)
        algo = build_algo(config, env)
        steps = args.patience * config.algorithm.period
        for folder in checkpoints_of(run_dir, args.checkpoints):
            load_learner(algo, folder)
            for radius in args.radii:
                result = {"run": str(run_dir), "checkpoint": folder.name, "radius": radius,
                          **score(algo, env, radius, args.trials, steps)}
                results.append(result)
                rows.append([f"{run_dir.parent.name}/{run_dir.name}", folder.name, f"{radius:g}",
                             f"{result['reach_rate']:.2f}", f"{result['closest_mean']:.2f}"])
                print(rows[-1], flush=True)
    print(markdown_table(["run", "checkpoint", "radius", "reach rate", "closest (mean)"], rows))
    if args.json:
        write_json(args.json, {"trials": args.trials, "patience": args.patience,
                               "results": results})


if __name__ == "__main__":
    main()
