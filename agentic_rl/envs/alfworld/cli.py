"""CLI pieces for ALFWorld: ``agentic-rl alfworld-gen`` and the ALFWorld branch of ``demos``.

The main CLI adds them with two calls::

    from agentic_rl.envs.alfworld import cli as alfworld_cli
    alfworld_cli.register(sub)                         # adds `alfworld-gen`
    alfworld_cli.add_demo_arguments(demos_parser)      # --split/--games/--data/--workers
    # in cmd_demos:
    if args.env == alfworld_cli.ENV_ID:
        return alfworld_cli.run_alfworld_demos(args)
"""

from __future__ import annotations

import argparse
import json

from agentic_rl.envs.alfworld import ENV_ID
from agentic_rl.envs.alfworld.data import SPLITS, TASK_TYPES

ROOM_KINDS = ("kitchen", "bathroom", "bedroom", "livingroom")


def run_alfworld_gen(args: argparse.Namespace) -> list[str]:
    """Write generated games (``alfworld-gen``); prints and returns the game files."""
    from agentic_rl.envs.alfworld.generator import generate_games

    games = generate_games(args.out, args.n, task_types=args.task_types, rooms=args.rooms,
                           max_receptacles=args.max_receptacles, seed=args.seed)
    print(f"wrote {len(games)} planner-checked ALFWorld games to {args.out}")
    return [str(g) for g in games]


def run_alfworld_demos(args: argparse.Namespace) -> dict:
    """Record expert demonstrations (``demos --env agentic_rl/ALFWorld-v0``).

    Uses ``args.split``, ``args.data``, ``args.games``, ``args.workers``, ``args.seed``,
    ``args.out``, ``args.max_steps``, ``args.task_types`` and ``args.keep_failures``; prints the
    expert's success per task type and returns it.
    """
    from agentic_rl.envs.alfworld.demos import (
        format_table,
        run_episodes,
        save_episodes,
        success_by_type,
    )

    env_kwargs = {"split": args.split, "data_path": args.data, "max_steps": args.max_steps,
                  "task_types": args.task_types}
    episodes = run_episodes(env_kwargs, args.games, "expert", args.workers, args.seed)
    arrays = save_episodes(episodes, args.out, ENV_ID, successful_only=not args.keep_failures)
    stats = success_by_type(episodes)
    print(format_table({"expert": stats}))
    print(f"wrote {len(arrays['episode_length'])} episodes ({len(arrays['action'])} steps) to "
          f"{args.out}")
    return stats


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ALFWorld options to the ``demos`` subcommand's parser."""
    group = parser.add_argument_group("ALFWorld (--env agentic_rl/ALFWorld-v0)")
    group.add_argument("--split", default="train", choices=SPLITS)
    group.add_argument("--data", default=None,
                       help="split folder, folder of trials, data root or slim pack "
                            "(default: $ALFWORLD_SLIM / $ALFWORLD_DATA)")
    group.add_argument("--games", type=int, default=None, help="number of games (default all)")
    group.add_argument("--workers", type=int, default=1, help="parallel processes")
    group.add_argument("--max-steps", type=int, default=50)
    group.add_argument("--task-types", nargs="+", choices=TASK_TYPES, default=None)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``alfworld-gen`` to the main CLI's subparsers."""
    gen = subparsers.add_parser("alfworld-gen", help="write generated ALFWorld-compatible games")
    gen.add_argument("--out", required=True, help="output folder (use it as data path)")
    gen.add_argument("--n", type=int, required=True, help="number of games")
    gen.add_argument("--task-types", nargs="+", choices=TASK_TYPES, default=None)
    gen.add_argument("--rooms", nargs="+", choices=ROOM_KINDS, default=None)
    gen.add_argument("--max-receptacles", type=int, default=12,
                     help="receptacles per room (small rooms for early curriculum stages)")
    gen.add_argument("--seed", type=int, default=0)
    gen.set_defaults(func=run_alfworld_gen)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m agentic_rl.envs.alfworld.cli alfworld-gen|demos``."""
    parser = argparse.ArgumentParser(prog="agentic-rl (alfworld)")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    demos = sub.add_parser("demos", help="record ALFWorld expert demonstrations")
    demos.add_argument("--env", default=ENV_ID, choices=[ENV_ID])
    demos.add_argument("--out", required=True)
    demos.add_argument("--seed", type=int, default=0)
    demos.add_argument("--keep-failures", action="store_true")
    add_demo_arguments(demos)
    demos.set_defaults(func=run_alfworld_demos)
    args = parser.parse_args(argv)
    result = args.func(args)
    if isinstance(result, dict):
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
