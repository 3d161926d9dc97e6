"""Safety-constrained training (issue 21), every method trained without a shield:
``--task fetch``: SAC-Lagrangian against unconstrained SAC+HER on FetchReach-v4 with a forbidden
box (``configs/sac_lag_fetch_reach_obstacle.yaml``); ``--task lava``: PPO-Lagrangian against PPO
in a 6x6 room with a lava cell (``configs/ppo_lag_gridworld_lava.yaml``). Per method and seed:
violations during training (the monitor counts every training step that breaks a property),
then ``--episodes`` evaluation episodes without a shield (success and violations). With both
methods, the ratio of their training violations (unconstrained over constrained) is also given
cumulatively to the end of each quarter: the ratio depends on the budget.

    python benchmarks/safe_rl.py --task fetch --seeds 3 --json bench_out/safe_rl.json
    python benchmarks/safe_rl.py --task lava --seeds 3 --json bench_out/safe_rl_lava.json
    python benchmarks/safe_rl.py --task fetch --seeds 1 --steps 20000 --set training.learning_starts=50
    python benchmarks/safe_rl.py --task fetch --steps 20000 --lag-set verification.reset_on_violation=true

The unconstrained twin is the same config without the constraint: the Lagrangian's own
algorithm keys and ``verification.reset_on_violation`` are dropped. ``--set`` then overrides
the config of both methods (so ``--set verification.reset_on_violation=true`` gives SAC the
reset too), ``--lag-set`` the constrained one's alone, ``--methods`` runs a subset.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, unconstrained, write_json  # noqa: E402

TASKS = {"fetch": ("configs/sac_lag_fetch_reach_obstacle.yaml", ("sac_lag", "sac"), 40_000),
         "lava": ("configs/ppo_lag_gridworld_lava.yaml", ("ppo_lag", "ppo"), 300_000)}
QUARTERS = 4  # training violations are also reported per quarter of the run


def run(config_file: str, method: str, seed: int, steps: int, episodes: int,
        folder: Path, overrides: Sequence[str] = ()) -> dict:
    from agentic_rl.config import validate_config
    from agentic_rl.train.run import train

    config = validate_config(method_config(config_file, method, [
        f"training.seed={seed}", f"training.total_timesteps={steps}",
        f"training.num_eval_episodes={episodes}", f"training.eval_freq={steps}",
        f"training.log_freq={steps // QUARTERS}", *overrides]))
    run_dir = folder / f"{method}_seed{seed}"
    summary = train(config, run_dir, show_progress=False)
    safety = summary["safety"]
    return {"success": summary["success_rate"], "train_violations": safety["train"]["violations"],
            "train_violations_by_quarter": by_quarter(run_dir, steps),
            "eval_violations": safety["eval"]["violations"]}


def method_config(config_file: str, method: str, overrides: Sequence[str]) -> dict:
    """The raw config ``method`` runs: the file's, unconstrained for a plain method (its
    Lagrangian keys and ``verification.reset_on_violation`` dropped), then ``overrides``."""
    from agentic_rl.config import apply_override, read_config

    raw = read_config(config_file)
    raw["algorithm"]["name"] = method
    if not method.endswith("_lag"):
        raw["algorithm"] = unconstrained(raw["algorithm"], method)
        raw.get("verification", {}).pop("reset_on_violation", None)  # a constraint mechanism
    for override in overrides:
        apply_override(raw, override)
    return raw


def by_quarter(run_dir: Path, steps: int) -> list[int]:
    """Training violations in each quarter of the run: the logged running total at the first
    log at or after each quarter's end (so any ``training.log_freq`` override reads right)."""
    from agentic_rl.train.logger import read_metrics

    logged = read_metrics(run_dir / "metrics.csv")["safety/violations"]
    totals = [0] + [int(next((v for step, v in logged if step >= steps * k // QUARTERS),
                             logged[-1][1])) for k in range(1, QUARTERS + 1)]
    return [after - before for before, after in zip(totals, totals[1:])]


def cumulative_ratios(constrained: list[dict], plain: list[dict]) -> list[float]:
    """Unconstrained over constrained training violations, seed means, cumulative to the end of
    each quarter: how the ratio the bar asks for depends on the budget (the constrained
    learner's violations stop early, the unconstrained one's go on); inf where the constrained
    learner has none yet."""
    def cumulative(runs: list[dict]) -> np.ndarray:
        return np.cumsum(np.mean([r["train_violations_by_quarter"] for r in runs], axis=0))

    ours, theirs = cumulative(constrained), cumulative(plain)
    return [float(t / o) if o > 0 else float("inf") for o, t in zip(ours, theirs)]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="fetch", choices=list(TASKS))
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=3, help="seeds seed, seed+1, ...")
    parser.add_argument("--steps", type=int, default=None, help="default: the task's budget")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes")
    parser.add_argument("--log-dir", default=None, help="keep the runs here (default: temp)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for both methods (e.g. training.learning_starts=50)")
    parser.add_argument("--lag-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for the constrained method alone (e.g. "
                        "verification.reset_on_violation=true)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="run these of the task's two methods (default: both)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    folder = Path(args.log_dir or tempfile.mkdtemp(prefix="safe_rl_"))
    config_file, methods, budget = TASKS[args.task]
    steps = args.steps or budget
    unknown = set(args.methods or ()) - set(methods)
    if unknown:
        parser.error(f"--methods: {sorted(unknown)} not among {list(methods)} for {args.task}")
    results: dict[str, dict] = {}
    for method in args.methods or methods:
        overrides = [*args.set, *(args.lag_set if method.endswith("_lag") else ())]
        runs = [run(config_file, method, seed, steps, args.episodes, folder, overrides)
                for seed in range(args.seed, args.seed + args.seeds)]
        results[method] = {"runs": runs, **{f"{key}_mean": float(np.mean([r[key] for r in runs]))
                                            for key in ("success", "train_violations",
                                                        "eval_violations")},
                           "success_std": float(np.std([r["success"] for r in runs]))}
    rows = [[m, f"{r['success_mean']:.2f} +- {r['success_std']:.2f}",
             f"{r['train_violations_mean']:.0f}",
             " / ".join(f"{q:.1f}" for q in np.mean([x["train_violations_by_quarter"]
                                                      for x in r["runs"]], axis=0)),
             f"{r['eval_violations_mean']:.1f}",
             ", ".join(f"{x['success']:.2f}/{x['train_violations']}/{x['eval_violations']}"
                       for x in r["runs"])] for m, r in results.items()]
    print(markdown_table(["method", "eval success", "train violations",
                          "train violations by quarter", "eval violations",
                          "per seed (success/train/eval)"], rows))
    payload = {"task": args.task, "steps": steps, "episodes": args.episodes,
               "seeds": args.seeds, "first_seed": args.seed, "overrides": args.set,
               "constrained_overrides": args.lag_set, **results}
    if len(results) == 2:  # both methods ran: the bar's ratio at each quarter's budget
        constrained, plain = methods
        ratios = cumulative_ratios(results[constrained]["runs"], results[plain]["runs"])
        payload["train_violation_ratio_by_quarter"] = ratios
        print(f"training violations, {plain} / {constrained}, cumulative to the end of each "
              f"quarter ({steps // QUARTERS} steps each): "
              + " / ".join(f"{r:.1f}x" for r in ratios))
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
