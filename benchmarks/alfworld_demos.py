"""Expert demonstrations for the ALFWorld text agents, in two parts written to one file.

ALFWorld's handcoded expert plays five task types in well under a second per game; for
``pick_two_obj_and_place`` it needs a Fast Downward plan, which takes 10-60 s per game. So the
five fast types get ``--fast-games`` games and pick_two ``--pick-two-games`` (each a seeded
subset of the split, the same subsets ``agentic-rl demos --task-types ...`` draws).

    python benchmarks/alfworld_demos.py --data ../shared/alfworld/train_slim.tar.xz \
        --fast-games 900 --pick-two-games 120 --out data/alfworld_demos_train.npz

More demonstrations of some types, on games no earlier file demonstrates (train with both files:
``algorithm.prototype_data_path=[data/alfworld_demos_train.npz,data/alfworld_demos_more.npz]``):

    python benchmarks/alfworld_demos.py --fast-games 100 --fast-types look_at_obj_in_light \
        --pick-two-games 150 --exclude data/alfworld_demos_train.npz \
        --out data/alfworld_demos_more.npz
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> None:
    from agentic_rl.envs.alfworld.data import TASK_TYPES
    from agentic_rl.envs.alfworld.demos import (
        format_table,
        run_episodes,
        save_episodes,
        success_by_type,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/alfworld/train_slim.tar.xz")
    parser.add_argument("--split", default="train")
    parser.add_argument("--fast-games", type=int, default=900)
    parser.add_argument("--fast-types", nargs="+", default=None, metavar="TYPE",
                        help="the fast task types to demonstrate (default: all five)")
    parser.add_argument("--pick-two-games", type=int, default=120)
    parser.add_argument("--exclude", nargs="+", default=[], metavar="NPZ",
                        help="skip the games these demonstration files already hold")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="data/alfworld_demos_train.npz")
    args = parser.parse_args(argv)

    base = {"split": args.split, "data_path": args.data, "max_steps": args.max_steps}
    start = time.time()
    fast = args.fast_types or [t for t in TASK_TYPES if t != "pick_two_obj_and_place"]
    if "pick_two_obj_and_place" in fast:
        parser.error("--fast-types: pick_two_obj_and_place is demonstrated by --pick-two-games")
    episodes = []
    if args.fast_games:
        episodes = run_episodes(games_of(base, fast, args.exclude), args.fast_games, "expert",
                                args.workers, args.seed)
        print(f"{len(episodes)} games of {len(fast)} fast task types: "
              f"{time.time() - start:.0f} s", flush=True)
    if args.pick_two_games:
        episodes += run_episodes(games_of(base, ["pick_two_obj_and_place"], args.exclude),
                                 args.pick_two_games, "expert", args.workers, args.seed)
    arrays = save_episodes(episodes, args.out, "agentic_rl/ALFWorld-v0")
    print(format_table({"expert": success_by_type(episodes)}))
    print(f"wrote {len(arrays['episode_length'])} successful episodes to {args.out} "
          f"({time.time() - start:.0f} s)")


def games_of(base: dict, task_types: list[str], exclude: list[str]) -> dict:
    """Env arguments over the split's games of ``task_types`` less those demonstrated in the
    ``exclude`` files (run_episodes then draws its seeded subset from what is left)."""
    from agentic_rl.collect.text_envs import demo_games
    from agentic_rl.envs.alfworld.data import game_key, list_games

    done = demo_games(exclude)
    games = [str(g) for g in list_games(base["split"], base["data_path"], task_types)]
    left = [g for g in games if game_key(g) not in done]
    if not left:
        raise SystemExit(f"every game of {task_types} is in {exclude}")
    return {**base, "task_types": task_types, "games": left}


if __name__ == "__main__":
    main()
