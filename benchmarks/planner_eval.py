"""Evaluate checkpoints of an ``hgpo_sac`` run with its own config and with config overrides,
typically a planner switched on (``algorithm.visit_planner.cell=0.5``) or off
(``algorithm.visit_planner=null``) for evaluation: the checkpoint's replay is restored, so a
planner that builds its graph from it plans from what the run had seen at that step. Same
evaluation episodes (the run's seed) for both rows.

    python benchmarks/planner_eval.py RUN_DIR --checkpoints step_000400000 --episodes 20 \\
        --set algorithm.visit_planner.cell=0.5 --goal-plot figures/antmaze_goals.png

Reads the run folder (``config.yaml``, ``checkpoints/``); writes nothing there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402
from hgpo_vs_flat import evaluate_checkpoint  # noqa: E402


DIAGNOSTICS = ("subgoal_reached_rate", "subgoal_path_distance", "subgoal_saturation")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an hgpo_sac run folder")
    parser.add_argument("--checkpoints", nargs="+", required=True, help="e.g. step_000400000")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--set", nargs="+", required=True, metavar="KEY=VALUE",
                        help="overrides of the second row (e.g. algorithm.visit_planner.cell=0.5)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--goal-plot", type=Path, default=None,
                        help="PNG of the subgoals of the last checkpoint's --set row (D1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows, results = [], []
    for name in args.checkpoints:
        folder = args.run / "checkpoints" / name
        if not folder.is_dir():
            parser.error(f"{folder} is not a checkpoint folder")
        for label, overrides in (("run config", []), ("with --set", args.set)):
            plot = (args.goal_plot if name == args.checkpoints[-1] and label == "with --set"
                    else None)
            result = {"checkpoint": name, "row": label, "overrides": overrides,
                      **evaluate_checkpoint(args.run, folder, overrides, args.episodes, plot)}
            results.append(result)
            rows.append([name, label, f"{result['success_rate']:.2f}",
                         f"{result['mean_length']:.0f}",
                         *(f"{result.get(k, float('nan')):.2f}" for k in DIAGNOSTICS)])
            print(rows[-1], flush=True)
    print(markdown_table(["checkpoint", "row", "success", "mean length", "subgoals reached",
                          "subgoal-path distance", "saturation"], rows))
    payload = {"run": str(args.run), "episodes": args.episodes, "overrides": args.set,
               "results": results}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
