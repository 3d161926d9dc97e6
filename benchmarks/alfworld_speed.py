"""Stock TextWorld engine vs agentic-rl's fast engine on the same ALFWorld games and actions.

For each trajectory: load + reset a game in both engines, then play the same random admissible
commands (drawn from a seeded generator over the stock engine's admissible commands) and compare
the observation text, admissible commands, reward and done of every step.

    python benchmarks/alfworld_speed.py --data ../shared/alfworld/valid_seen_slim.tar.xz \
        --trajectories 200 --steps 15 --json bench_out/alfworld_speed.json

Writes {"identical", "trajectories", "stock_steps_per_s", "ours_steps_per_s", "speedup",
"stock_reset_s", "ours_reset_s", "ours_reset_warm_s", ...}. Timing is one process on one core.
Set AGENTIC_RL_CACHE to an empty folder to time first visits with a cold translation cache.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402


def play(env, game: str, seed: int, steps: int, commands: list[str] | None) -> tuple:
    """Load, reset and step one engine; returns (trace, chosen commands, reset_s, step_s)."""
    start = time.perf_counter()
    env.load(game)
    state = env.reset()
    reset_s = time.perf_counter() - start
    trace = [(state.feedback, tuple(state["admissible_commands"]), None, None)]
    rng = random.Random(seed)
    chosen = []
    start = time.perf_counter()
    for step in range(steps):
        if commands is None:
            command = rng.choice(state["admissible_commands"])
        else:
            command = commands[step]
        chosen.append(command)
        state, reward, done = env.step(command)
        trace.append((state.feedback, tuple(state["admissible_commands"]), reward, done))
        if done:
            break
    return trace, chosen, reset_s, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    """Run the comparison and write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="split folder or slim pack file")
    parser.add_argument("--trajectories", type=int, default=200)
    parser.add_argument("--steps", type=int, default=15, help="random steps per trajectory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the report here")
    args = parser.parse_args(argv)

    from agentic_rl.envs.alfworld.data import list_games
    from agentic_rl.envs.alfworld.engine import make_engine

    games = [str(g) for g in list_games("valid_seen", args.data)]
    stock, ours = make_engine(fast=False), make_engine(fast=True)
    totals = {"stock": [0.0, 0.0], "ours": [0.0, 0.0]}
    steps_done = 0
    mismatches = []
    for index in range(args.trajectories):
        game = games[index % len(games)]
        seed = args.seed * 100_003 + index
        stock_trace, chosen, reset_s, step_s = play(stock, game, seed, args.steps, None)
        totals["stock"][0] += reset_s
        totals["stock"][1] += step_s
        ours_trace, _, reset_s, step_s = play(ours, game, seed, args.steps, chosen)
        totals["ours"][0] += reset_s
        totals["ours"][1] += step_s
        steps_done += len(chosen)
        if stock_trace != ours_trace:
            mismatches.append(game)
        if (index + 1) % 20 == 0:
            print(f"{index + 1}/{args.trajectories} trajectories, {len(mismatches)} mismatches",
                  file=sys.stderr, flush=True)
    # Second visits: the translation caches (memory, disk) are warm, as in a training run that
    # revisits its games. Stock has no cache, so its reset time is the same on every visit.
    revisit = games[: min(len(games), 20)]
    start = time.perf_counter()
    for game in revisit:
        ours.load(game)
        ours.reset()
    warm_reset_s = (time.perf_counter() - start) / len(revisit)
    report = {
        "identical": not mismatches,
        "trajectories": args.trajectories,
        "steps": steps_done,
        "games": len({games[i % len(games)] for i in range(args.trajectories)}),
        "stock_steps_per_s": steps_done / totals["stock"][1],
        "ours_steps_per_s": steps_done / totals["ours"][1],
        "speedup": totals["stock"][1] / totals["ours"][1],
        "stock_reset_s": totals["stock"][0] / args.trajectories,
        "ours_reset_s": totals["ours"][0] / args.trajectories,
        "reset_speedup": totals["stock"][0] / totals["ours"][0],
        "ours_reset_warm_s": warm_reset_s,
        "mismatched_games": mismatches[:10],
    }
    print(f"{'engine':<8}{'steps/s':>10}{'load+reset s':>14}")
    print(f"{'stock':<8}{report['stock_steps_per_s']:>10.1f}{report['stock_reset_s']:>14.3f}")
    print(f"{'ours':<8}{report['ours_steps_per_s']:>10.1f}{report['ours_reset_s']:>14.3f}")
    print(f"ours, revisited games (warm translation cache): {warm_reset_s:.3f} s per load+reset")
    print(f"speedup x{report['speedup']:.1f} (steps), x{report['reset_speedup']:.1f} (reset); "
          f"identical on {args.trajectories} trajectories: {report['identical']}")
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
