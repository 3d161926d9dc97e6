"""ALFWorld text agents on generated games that no agent trained or was selected on.

`agentic-rl alfworld-gen` writes planner-checked games in ALFWorld's format (rooms, objects and
receptacle counts of its own, so a shift from the train games); this script generates a fixed set
once and plays every given model on all of them, greedily, one episode per game, through the
same evaluation as `agentic-rl eval`. It decides design choices without valid_seen: issue 19's
avoid_revisits was kept on it (benchmarks/README.md).

    python benchmarks/alfworld_generated.py --games-dir /tmp/gen_b --n 120 --seed 20261207 \
        --models RUN_A/manager RUN_B/manager --json bench_out/alfworld_generated.json

One process plays the models in turn, so texts embedded for one are cached for the next; the
first model pays for most of the sentence encoder's work.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_facts, markdown_table, write_json  # noqa: E402


def generated_games(folder: Path, count: int, seed: int, max_receptacles: int) -> None:
    """Write ``count`` games into ``folder`` unless it already holds them (same arguments)."""
    from agentic_rl.envs.alfworld.generator import generate_games

    stamp = folder / ".generated"
    wanted = f"n={count} seed={seed} max_receptacles={max_receptacles}"
    if stamp.exists():
        if stamp.read_text() != wanted:
            raise SystemExit(f"{folder} holds games made with {stamp.read_text()}, not {wanted}; "
                             "pass another --games-dir")
        return
    if folder.exists() and any(folder.iterdir()):
        raise SystemExit(f"{folder} is not empty and was not written by this script")
    generate_games(folder, count, max_receptacles=max_receptacles, seed=seed)
    stamp.write_text(wanted)


def play(models: list[str], folder: Path, seed: int) -> dict[str, dict]:
    """Greedy evaluation of each model (a run or model folder) on every game in ``folder``."""
    import torch

    from agentic_rl.config import load_config
    from agentic_rl.train.text_eval import evaluate_text_model

    torch.set_num_threads(1)
    results = {}
    for model in models:  # load_config says which config.yaml is missing
        config = load_config(Path(model) / "config.yaml")
        results[model] = evaluate_text_model(config, model, folder, seed=seed)
        print(f"{model}: {results[model]['success_rate']:.3f} "
              f"({results[model]['wall_seconds']} s)", flush=True)
    return results


def table(results: dict[str, dict]) -> str:
    """One row per model: success overall and per task type, mean steps."""
    types = sorted({t for r in results.values() for t in r["per_task_type"]})
    rows = [[model, f"**{r['success_rate']:.3f}**",
             *(f"{r['per_task_type'][t]['success_rate']:.2f}" for t in types),
             f"{r['mean_steps']:.1f}"] for model, r in results.items()]
    return markdown_table(["model", "success", *types, "mean steps"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", required=True,
                        help="run folders (RUN/manager) or model folders (models/alfworld)")
    parser.add_argument("--games-dir", required=True, help="where the generated games live")
    parser.add_argument("--n", type=int, default=120, help="games, spread over the task types")
    parser.add_argument("--seed", type=int, default=20261207, help="generator seed")
    parser.add_argument("--max-receptacles", type=int, default=20)
    parser.add_argument("--eval-seed", type=int, default=12345)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n must be positive")
    folder = Path(args.games_dir)
    start = time.time()
    generated_games(folder, args.n, args.seed, args.max_receptacles)
    from agentic_rl.config import ConfigError

    try:
        results = play(args.models, folder, args.eval_seed)
    except ConfigError as error:
        raise SystemExit(f"{error} (pass run folders, RUN/manager, or model folders)") from None
    print(table(results))
    if args.json:
        write_json(args.json, {"games": vars(args), "results": results,
                               "machine": machine_facts(), "wall_seconds": time.time() - start})


if __name__ == "__main__":
    main()
