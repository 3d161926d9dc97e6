"""Sample efficiency (issue 3 acceptance): env steps until eval success reaches a target.

    python benchmarks/sample_efficiency.py --task reach --seeds 3 --json bench_out/reach.json
    python benchmarks/sample_efficiency.py --task push --seeds 3 --sb3 --json bench_out/push.json

reach: OPD with 20 expert episodes (target 0.95, bar <= 1,000 steps) and SAC+HER without demos
(bar <= 4,000 steps); eval every 100 steps on 20 deterministic episodes.
push: OPD with 100 expert episodes (target 0.90 within 100,000 steps), optionally SB3 SAC+HER
at the same budget and hyper-parameters. pick_and_place (issue 22): OPD with 100 expert
episodes on FetchPickAndPlace-v4 (target 0.90 within 200,000 steps), from scratch and
transferred (``--init-from``) from an OPD run on FetchPush-v4 of the same seed (trained first,
to 0.90; its steps are reported apart), and with phase skills
(``configs/opd_fetch_pick_and_place_skills.yaml``). Runs are sequential (``--jobs N``: N at a time), one
torch thread each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.config import load_config  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASKS = {
    "reach": [("opd (20 demos)", "configs/opd_fetch_reach.yaml", 0.95, 3000, 100),
              ("sac+her", "configs/sac_her_fetch_reach.yaml", 0.95, 6000, 100),
              ("td3+her", "configs/td3_her_fetch_reach.yaml", 0.95, 6000, 100)],
    "push": [("opd (100 demos)", "configs/opd_fetch_push.yaml", 0.90, 100_000, 2000)],
    "pick_and_place": [
        ("opd (100 demos)", "configs/opd_fetch_pick_and_place.yaml", 0.90, 200_000, 4000),
        ("opd transfer (from push)", "configs/opd_fetch_pick_and_place.yaml", 0.90, 200_000,
         4000),
        ("opd skills (learned phases)", "configs/opd_fetch_pick_and_place_skills.yaml", 0.90,
         200_000, 4000),
        ("opd skills (rule phases)", "configs/opd_fetch_pick_and_place_skills.yaml", 0.90,
         200_000, 4000, ("algorithm.phase_skills.selection=rule",))],
}
# methods that start from another run: (its label, config, target, budget, eval_freq)
SOURCES = {"opd transfer (from push)": ("push source", "configs/opd_fetch_push.yaml", 0.90,
                                        100_000, 2000)}


def steps_to(history: list[dict], target: float) -> int | None:
    reached = [h["step"] for h in history if h["success_rate"] >= target]
    return reached[0] if reached else None


def run_ours(label, config_path, target, budget, eval_freq, seed, out_dir, eval_episodes,
             extra_overrides=(), init_from=None):
    overrides = [f"training.seed={seed}", f"training.total_timesteps={budget}",
                 f"training.eval_freq={eval_freq}", f"training.stop_success_rate={target}",
                 f"training.num_eval_episodes={eval_episodes}",
                 f"training.checkpoint_freq={budget}", *extra_overrides]
    config = load_config(REPO / config_path, overrides)
    name = label.replace(" ", "_").replace("+", "")
    # rows of one config that differ only by overrides get folders of their own (the label)
    run_dir = out_dir / f"{Path(config_path).stem}_{name}_seed{seed}_{int(time.time())}"
    summary = train(config, run_dir, show_progress=False, init_from=init_from)
    history = summary["eval_history"]
    return {"method": label, "seed": seed, "steps_to_target": steps_to(history, target),
            "best_success": max(h["success_rate"] for h in history),
            "env_steps": summary["env_steps"], "wall_seconds": summary["wall_seconds"],
            "run_dir": str(run_dir)}


def ensure_demos(config_path: str) -> None:
    """Record a config's demonstration file now if it is missing (as its first run would), so
    parallel runs do not record it at once."""
    from agentic_rl.experts.demos import record_demos, save_demos

    config = load_config(REPO / config_path)
    path = config.algorithm.prototype_data_path
    if path and not Path(path).exists():
        env = config.environment
        save_demos(record_demos(env.name, config.algorithm.prototype_episodes,
                                seed=config.training.seed + 10_000_000, env_kwargs=env.kwargs,
                                goal_region=env.goal_region), path)


SB3 = "sb3 sac+her"


def run_sb3(env_id: str, target: float, budget: int, eval_freq: int, seed: int,
            episodes: int) -> dict:
    """One seed of SB3 SAC+HER on the task's env, stopped at the target like ours."""
    from sb3_her import train_sb3_her

    result = {"method": SB3, "seed": seed,
              **train_sb3_her(env_id, budget, seed, eval_freq, episodes, stop_success=target)}
    print({k: v for k, v in result.items() if k != "eval_history"}, flush=True)
    return result


def run_method(job: tuple) -> dict:
    """One seed of one method (``job``: a ``TASKS`` row with the seed, folder, evaluation
    episodes and the row's overrides); a transfer method first trains its source run."""
    label, config_path, target, budget, eval_freq, seed, out_dir, episodes, overrides = job
    if label == SB3:
        env_id = load_config(REPO / config_path).environment.name
        return run_sb3(env_id, target, budget, eval_freq, seed, episodes)
    source = None
    if label in SOURCES:
        source = run_ours(*SOURCES[label], seed, out_dir, episodes)
        print(source, flush=True)
    result = run_ours(label, config_path, target, budget, eval_freq, seed, out_dir, episodes,
                      overrides, init_from=source["run_dir"] if source else None)
    if source is not None:
        result["source"] = {k: source[k] for k in ("steps_to_target", "env_steps",
                                                   "wall_seconds", "run_dir")}
    print(result, flush=True)
    return result


def summarise(results: list[dict]) -> list[dict]:
    rows = []
    for method in dict.fromkeys(r["method"] for r in results):
        mine = [r for r in results if r["method"] == method]
        steps = [r["steps_to_target"] for r in mine]
        finite = sorted(s if s is not None else float("inf") for s in steps)
        median = statistics.median(finite)
        rows.append({"method": method, "seeds": len(mine), "steps_to_target": steps,
                     "median_steps_to_target": None if median == float("inf") else median,
                     "best_success": [r["best_success"] for r in mine],
                     "wall_seconds": [r["wall_seconds"] for r in mine]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, help="override the env-step budget")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--sb3", action="store_true",
                        help="also run SB3 SAC+HER on the task's env (method 'sb3 sac+her')")
    parser.add_argument("--sb3-seeds", type=int, help="SB3 seeds (default: --seeds)")
    parser.add_argument("--out-dir", default="bench_out/sample_efficiency")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (processes)")
    parser.add_argument("--methods", nargs="*", help="only these methods (labels)")
    parser.add_argument("--json")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    rows = TASKS[args.task] + ([(SB3, *TASKS[args.task][0][1:5])] if args.sb3 else [])
    sb3_seeds = args.seeds if args.sb3_seeds is None else args.sb3_seeds
    jobs = [(label, config_path, target, args.budget or budget, eval_freq, seed, out_dir,
             args.eval_episodes, tuple(extra[0]) if extra else ())
            for seed in range(max(args.seeds, sb3_seeds))
            for label, config_path, target, budget, eval_freq, *extra in rows
            if (not args.methods or label in args.methods)
            and seed < (sb3_seeds if label == SB3 else args.seeds)]  # seed by seed: all
    # methods of a seed finish before the next seed's start
    for config_path in {job[1] for job in jobs if job[0] != SB3} | {
            SOURCES[j[0]][1] for j in jobs if j[0] in SOURCES}:
        ensure_demos(config_path)
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run_method, jobs))
    else:
        results = [run_method(job) for job in jobs]
    rows = summarise(results)
    print(markdown_table(["method", "seeds", "steps to target per seed", "median",
                          "best success per seed", "wall s per seed"],
                         [[r["method"], r["seeds"], r["steps_to_target"],
                           r["median_steps_to_target"], r["best_success"], r["wall_seconds"]]
                          for r in rows]))
    write_json(args.json, {"task": args.task, "summary": rows, "runs": results})


if __name__ == "__main__":
    main()
