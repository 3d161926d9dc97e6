"""How an AntMaze learner's ant carries itself in deterministic evaluation episodes, checkpoint
by checkpoint: success, the share of episodes in which the torso rose above Ant-v5's healthy
height (1.0: a jump), the share in which the ant ended up on its back (the torso's up axis
pointing down) and the mean step of that first flip, and the share of steps spent on its back.
A flipped ant cannot right itself and crawls; no maze is solved that way.

    python benchmarks/ant_posture.py RUN_DIR [RUN_DIR ...] --checkpoints step_000200000
    python benchmarks/ant_posture.py --random-bounds 1.0 0.5 0.3 0.2 --episodes 10

``--random-bounds``: the same measures for uniform random actions within that share of the
ant's action range (``algorithm.worker_action_bound``), episodes cut at 500 steps.

Episodes run on the env as configured, without ``terminate_when_unhealthy`` or
``terminate_when_flipped`` (so a jump or a flip is seen, not cut off), from the evaluation seeds
of the run. Reads the run folders; writes nothing there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.algos.spaces import shrunk_box  # noqa: E402
from agentic_rl.config import read_config, validate_config  # noqa: E402
from agentic_rl.data.checkpoint import load_learner  # noqa: E402
from agentic_rl.envs.make import make_env  # noqa: E402
from agentic_rl.envs.mazes import torso_up_z  # noqa: E402
from agentic_rl.train.evaluate import EVAL_SEED_OFFSET, batch_of_one  # noqa: E402
from agentic_rl.train.setup import build_algo  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
HEALTHY_TOP = 1.0  # Ant-v5's default healthy_z_range is (0.2, 1.0)


def episode_posture(policy, env, seed: int, max_steps: int | None = None) -> dict[str, float]:
    """One episode of ``policy(obs, info) -> action``: success, whether it jumped, when it
    first lay on its back."""
    obs, info = env.reset(seed=seed)
    heights, ups = [], []
    terminated = truncated = False
    while not (terminated or truncated or len(heights) == max_steps):
        obs, _, terminated, truncated, info = env.step(policy(obs, info))
        heights.append(float(obs["observation"][0]))  # the ant's torso height, then its quaternion
        ups.append(torso_up_z(obs["observation"][1:5]))
    on_back = np.asarray(ups) < 0
    return {"success": float(info.get("is_success", False)),
            "jumped": float(max(heights) > HEALTHY_TOP), "flipped": float(on_back.any()),
            "first_flip": float(np.argmax(on_back)) if on_back.any() else float("nan"),
            "steps_on_back": float(on_back.mean())}


def mean_posture(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.nanmean([r[key] for r in runs])) if key != "first_flip" or any(
        np.isfinite(r[key]) for r in runs) else float("nan") for key in runs[0]}


def deterministic_policy(algo):
    """A fresh episode's policy: the learner's deterministic act with its own subgoal state."""
    state = None

    def policy(obs, info):
        nonlocal state
        action, state, _ = algo.act(batch_of_one(obs, info), state, "deterministic")
        return action[0].numpy()
    return policy


def posture(run_dir: Path, checkpoint: str, episodes: int) -> dict[str, float]:
    config = validate_config(read_config(run_dir / "config.yaml", [
        "environment.kwargs.terminate_when_unhealthy=false",
        "environment.kwargs.terminate_when_flipped=false"]))
    env = make_env(config.environment.name, config.environment.kwargs)
    algo = build_algo(config, env)
    load_learner(algo, run_dir / "checkpoints" / checkpoint)
    runs = [episode_posture(deterministic_policy(algo), env,
                            config.training.seed + EVAL_SEED_OFFSET + k)
            for k in range(episodes)]
    env.close()
    return mean_posture(runs)


def random_posture(bound: float, episodes: int, max_steps: int = 500) -> dict[str, float]:
    """Uniform random actions within ``bound`` of the ant's range, on the committed AntMaze
    config's env (seed k for episode k)."""
    config = validate_config(read_config(CONFIGS / "hgpo_antmaze.yaml", []))
    env = make_env(config.environment.name, config.environment.kwargs)
    low, high = shrunk_box(env.action_space.low, env.action_space.high, bound)
    rng = np.random.default_rng(0)
    runs = [episode_posture(lambda obs, info: rng.uniform(low, high), env, k, max_steps)
            for k in range(episodes)]
    env.close()
    return mean_posture(runs)


def measured_rows(args) -> list[tuple[str, str, dict[str, float]]]:
    """``(what, checkpoint or bound, measures)`` for the runs' checkpoints or random bounds."""
    if args.random_bounds:
        return [("uniform random actions", f"bound {bound}", random_posture(bound, args.episodes))
                for bound in args.random_bounds]
    rows = []
    for run_dir in args.runs:
        for checkpoint in args.checkpoints:
            if not (run_dir / "checkpoints" / checkpoint).is_dir():
                print(f"{run_dir}: no {checkpoint}, skipped", flush=True)
                continue
            rows.append((f"{run_dir.parent.name}/{run_dir.name}", checkpoint,
                         posture(run_dir, checkpoint, args.episodes)))
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="AntMaze run folders")
    parser.add_argument("--checkpoints", nargs="+", default=[], help="e.g. step_000200000")
    parser.add_argument("--random-bounds", nargs="+", type=float, default=[],
                        help="instead of runs: uniform random actions within these shares of "
                        "the ant's action range")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.random_bounds and not (args.runs and args.checkpoints):
        parser.error("give run folders with --checkpoints, or --random-bounds")
    torch.set_num_threads(1)
    rows, results = [], []
    for what, where, result in measured_rows(args):
        results.append({"run": what, "checkpoint": where, **result})
        rows.append([what, where, *(f"{result[k]:.2f}" for k in ("success", "jumped", "flipped")),
                     f"{result['first_flip']:.0f}", f"{result['steps_on_back']:.2f}"])
    print(markdown_table(["run", "checkpoint / bound", "success", "jumped (z > 1)", "on its back",
                          "first flip (step)", "steps on its back"], rows))
    payload = {"episodes": args.episodes, "results": results}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
