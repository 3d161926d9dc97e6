"""Expert demonstrations for the ALFWorld text agents, in two parts written to one file.

ALFWorld's handcoded expert plays five task types in well under a second per game; for
``pick_two_obj_and_place`` it needs a Fast Downward plan, which takes 10-60 s per game. So the
five fast types get ``--fast-games`` games and pick_two ``--pick-two-games`` (each a seeded
subset of the split, the same subsets ``agentic-rl demos --task-types ...`` draws).

    python benchmarks/alfworld_demos.py --data ../shared/alfworld/train_slim.tar.xz \
        --fast-games 900 --pick-two-games 120 --out data/alfworld_demos_train.npz
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
    parser.add_argument("--pick-two-games", type=int, default=120)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="data/alfworld_demos_train.npz")
    args = parser.parse_args(argv)

    base = {"split": args.split, "data_path": args.data, "max_steps": args.max_steps}
    start = time.time()
    fast = [t for t in TASK_TYPES if t != "pick_two_obj_and_place"]
    episodes = run_episodes({**base, "task_types": fast}, args.fast_games, "expert",
                            args.workers, args.seed)
    print(f"{len(episodes)} games of the five fast task types: {time.time() - start:.0f} s",
          flush=True)
    episodes += run_episodes({**base, "task_types": ["pick_two_obj_and_place"]},
                             args.pick_two_games, "expert", args.workers, args.seed)
    arrays = save_episodes(episodes, args.out, "agentic_rl/ALFWorld-v0")
    print(format_table({"expert": success_by_type(episodes)}))
    print(f"wrote {len(arrays['episode_length'])} successful episodes to {args.out} "
          f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
