"""Prioritised replay against uniform replay (issue 21): the same config, seeds and budget, only
``algorithm.prioritized`` differs.

    python benchmarks/prioritized_replay.py --task push --seeds 3 --jobs 2 --json F
    python benchmarks/prioritized_replay.py --task pointmaze --seeds 3 --jobs 2 --json F
    python benchmarks/prioritized_replay.py --task speed --repeats 3 --json F   # machine idle

push: OPD with 100 demos on FetchPush-v4, env steps until eval success >= 0.90 (20 episodes
every 2,000 steps, 100k budget). pointmaze: SAC+HER on PointMaze_Medium-v3, env steps until
eval success >= 0.70 (50 episodes every 5,000 steps, 100k budget). Runs stop at the bar.
speed: whole-loop env steps/s on FetchReach-v4 with [256,256] networks, each switch of issue 21
against the same config without it (alternated runs, median of ``--repeats``), one torch thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, unconstrained, write_json  # noqa: E402
from sample_efficiency import REPO, run_ours, summarise  # noqa: E402

TASKS = {"push": ("configs/opd_fetch_push.yaml", 0.90, 100_000, 2000, 20),
         "pointmaze": ("configs/sac_her_pointmaze.yaml", 0.70, 100_000, 5000, 50)}
METHODS = {"uniform": (), "prioritized": ("algorithm.prioritized={}",)}
# (switch, config, overrides without it, overrides with it); FetchReach, [256, 256]. The
# Lagrangian's "without" is the same config run by plain SAC (common.unconstrained).
SWITCHES = [
    ("prioritized replay (SAC+HER)", "configs/sac_her_fetch_reach.yaml", (),
     ("algorithm.prioritized={}",)),
    ("prioritized replay (OPD)", "configs/opd_fetch_reach.yaml", (),
     ("algorithm.prioritized={}",)),
    ("Lagrangian constraint (SAC-Lag vs SAC, monitor on in both)",
     "configs/sac_lag_fetch_reach_obstacle.yaml", ("algorithm.name=sac",), ()),
]


def sample_efficiency(args: argparse.Namespace) -> dict:
    config, target, budget, eval_freq, episodes = TASKS[args.task]
    out_dir = Path(args.out_dir)
    jobs = [(f"{method}", config, target, args.budget or budget, eval_freq, seed, out_dir,
             episodes, overrides) for method, overrides in METHODS.items()
            for seed in range(args.seeds)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_run, jobs))
    rows = summarise(results)
    print(markdown_table(["replay", "seeds", "steps to target per seed", "median",
                          "best success per seed", "wall s per seed"],
                         [[r["method"], r["seeds"], r["steps_to_target"],
                           r["median_steps_to_target"], r["best_success"], r["wall_seconds"]]
                          for r in rows]))
    return {"task": args.task, "target": target, "summary": rows, "runs": results}


def _run(job: tuple) -> dict:
    result = run_ours(*job)
    print(result, flush=True)
    return result


def steps_per_second(config: str, overrides: tuple[str, ...], steps: int, out_dir: Path) -> float:
    from agentic_rl.algos import CONFIGS
    from agentic_rl.config import read_config, validate_config
    from agentic_rl.train.run import train

    raw = read_config(REPO / config, [
        f"training.total_timesteps={steps}", f"training.eval_freq={steps}",
        "training.num_eval_episodes=1", f"training.checkpoint_freq={steps}",
        "training.stop_success_rate=null", "algorithm.hidden_sizes=[256,256]", *overrides])
    name = raw["algorithm"]["name"]
    if not name.endswith("_lag") and f"{name}_lag" in CONFIGS:
        raw["algorithm"] = unconstrained(raw["algorithm"], name)
    run = validate_config(raw)
    start = time.perf_counter()
    summary = train(run, out_dir / f"run_{time.time_ns()}", show_progress=False)
    return summary["env_steps"] / (time.perf_counter() - start)


def speed(args: argparse.Namespace) -> dict:
    out_dir, rows, results = Path(args.out_dir), [], {}
    for switch, config, without, with_switch in SWITCHES:
        if args.only and args.only not in switch:
            continue
        base, switched = [], []
        for _ in range(args.repeats):  # alternated, so drifts in machine speed cancel
            base.append(steps_per_second(config, without, args.steps, out_dir))
            switched.append(steps_per_second(config, with_switch, args.steps, out_dir))
        off, on = statistics.median(base), statistics.median(switched)
        results[switch] = {"off": base, "on": switched, "cost": 1 - on / off}
        rows.append([switch, f"{off:.1f}", f"{on:.1f}", f"{100 * (1 - on / off):.1f}%"])
    print(markdown_table(["switch", "env steps/s off", "on", "cost"], rows))
    return {"task": "speed", "steps": args.steps, "repeats": args.repeats, **results}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=[*TASKS, "speed"], required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--budget", type=int, help="override the env-step budget")
    parser.add_argument("--steps", type=int, default=1500, help="speed: env steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="speed: alternated pairs")
    parser.add_argument("--only", help="speed: only the switches whose name contains this")
    parser.add_argument("--out-dir", default="bench_out/prioritized_replay")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    payload = speed(args) if args.task == "speed" else sample_efficiency(args)
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
