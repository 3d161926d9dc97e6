"""What a sweep found: per setting, the mean +- std over seeds of the final and the best
evaluation success, env steps and wall time (``sweep_summary.md`` / ``.csv``) and the learning
curves per setting (``sweep_curves.png``), read from the run folders in the sweep folder."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from agentic_rl.train.logger import read_metrics
from agentic_rl.train.plot import flat_config, plot_runs

COLUMNS = ("setting", "seeds", "stopped_early", "final_success_mean", "final_success_std",
           "best_success_mean", "best_success_std", "env_steps_mean", "wall_seconds_mean")


def run_folders(folder: str | Path) -> list[Path]:
    """Every run folder (one with ``metrics.csv``) below ``folder``, sorted."""
    return sorted(path.parent for path in Path(folder).glob("**/metrics.csv"))


def run_summary(run: Path) -> dict | None:
    """``summary.json``; for a run the scheduler stopped early, its evaluations so far from
    ``metrics.csv`` (``stopped``); None before its first evaluation."""
    if (run / "summary.json").exists():
        return json.loads((run / "summary.json").read_text())
    evals = read_metrics(run / "metrics.csv").get("eval/success_rate", [])
    if not evals:
        return None
    return {"success_rate": evals[-1][1], "env_steps": evals[-1][0], "wall_seconds": np.nan,
            "eval_history": [{"step": s, "success_rate": v} for s, v in evals], "stopped": True}


def summary_rows(folder: Path, keys: list[str]) -> list[dict[str, object]]:
    """One row per setting (the values of ``keys``) over the runs of its seeds."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for run in run_folders(folder):
        summary = run_summary(run)
        if summary is not None:
            flat = flat_config(run)
            setting = ", ".join(f"{key}={flat.get(key, '?')}" for key in keys)
            groups[setting].append(summary)
    rows = []
    for setting, summaries in sorted(groups.items()):
        final = [s.get("success_rate", s.get("best_holdout_success")) or 0.0 for s in summaries]
        best = [max([e["success_rate"] for e in s.get("eval_history", [])] or [f])
                for s, f in zip(summaries, final)]
        rows.append({"setting": setting, "seeds": len(summaries),
                     "stopped_early": sum(bool(s.get("stopped")) for s in summaries),
                     "final_success_mean": float(np.mean(final)),
                     "final_success_std": float(np.std(final)),
                     "best_success_mean": float(np.mean(best)),
                     "best_success_std": float(np.std(best)),
                     "env_steps_mean": float(np.mean([s["env_steps"] for s in summaries])),
                     "wall_seconds_mean": float(np.nanmean([s["wall_seconds"]
                                                            for s in summaries]))})
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    lines = ["| setting | seeds (stopped early) | final success | best success | env steps | "
             "wall s |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['seeds']} ({r['stopped_early']}) | "
                     f"{r['final_success_mean']:.2f} +- "
                     f"{r['final_success_std']:.2f} | {r['best_success_mean']:.2f} +- "
                     f"{r['best_success_std']:.2f} | {r['env_steps_mean']:.0f} | "
                     f"{r['wall_seconds_mean']:.1f} |")
    return "\n".join(lines)


def write_report(folder: Path, keys: list[str]) -> tuple[str, Path | None]:
    """Write the table (``.md``, ``.csv``) and the curves into ``folder``; returns the
    Markdown table and the PNG path (None when no run has evaluated yet)."""
    rows = summary_rows(folder, keys)
    table = markdown(rows)
    (folder / "sweep_summary.md").write_text(table + "\n")
    with open(folder / "sweep_summary.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    runs = run_folders(folder)
    png = plot_runs(runs, folder / "sweep_curves.png") if runs else None
    return table, png
