"""Random policy vs ALFWorld's expert, success per task type (default: valid_seen, 50 steps).

The expert is ALFWorld's handcoded expert, with the Fast Downward plan (requested once at reset)
for pick_two_obj_and_place; ``--no-planner`` shows the handcoded expert alone.

    python benchmarks/alfworld_experts.py --data ../shared/alfworld/valid_seen_slim.tar.xz \
        --json bench_out/alfworld_experts.json
"""

from __future__ import annotations

import sys

import argparse
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    """Run both policies on every game of the split and print/write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="split folder or slim pack file")
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--games", type=int, default=None,
                        help="a seeded subset of N games (default all)")
    parser.add_argument("--task-types", nargs="+", default=None, metavar="TYPE",
                        help="only these task types (default all)")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-planner", action="store_true")
    parser.add_argument("--plan-timeout", type=float, default=60.0,
                        help="seconds for the pick_two plan (then the handcoded expert)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from agentic_rl.envs.alfworld.demos import format_table, run_episodes, success_by_type

    env_kwargs = {"split": args.split, "data_path": args.data, "max_steps": args.max_steps,
                  "use_planner": not args.no_planner, "plan_timeout_s": args.plan_timeout,
                  "task_types": args.task_types}
    results, seconds, timeouts = {}, {}, 0
    for policy in ("random", "expert"):
        start = time.perf_counter()
        episodes = run_episodes(env_kwargs, args.games, policy, args.workers, args.seed)
        seconds[policy] = time.perf_counter() - start
        results[policy] = success_by_type(episodes)
        if policy == "expert":
            timeouts = sum(e["plan_timed_out"] for e in episodes)
    print(format_table(results))
    print(f"pick_two plans that ran out of time (handcoded expert used): {timeouts}")
    report = {"split": args.split, "task_types": args.task_types, "max_steps": args.max_steps,
              "planner": not args.no_planner,
              "plan_timeout_s": args.plan_timeout, "plan_timeouts": timeouts,
              "success": results, "seconds": seconds}
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
