"""Learning-curve figures (SPEC D1): eval success vs env steps (mean and spread over runs of
the same experiment) and the three OPD actor losses."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from agentic_rl.train.logger import read_metrics

OPD_LOSSES = ("losses/actor_sac_loss", "losses/actor_distill_loss", "losses/actor_total_loss")


def experiment_label(run_dir: Path) -> str:
    """Runs that differ only in ``training.seed`` share a label (and a curve)."""
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        return run_dir.name
    config = yaml.safe_load(config_path.read_text())
    return f"{config['algorithm']['name']} {config['environment']['name']}"


def mean_and_spread(curves: list[list[tuple[int, float]]]):
    """Align curves on the union of their steps (holding each run's last value) and return
    ``(steps, mean, min, max)``."""
    steps = np.array(sorted({s for curve in curves for s, _ in curve}))
    aligned = []
    for curve in curves:
        curve_steps = np.array([s for s, _ in curve])
        values = np.array([v for _, v in curve])
        index = np.searchsorted(curve_steps, steps, side="right") - 1
        aligned.append(np.where(index >= 0, values[np.clip(index, 0, None)], np.nan))
    stacked = np.vstack(aligned)
    return steps, np.nanmean(stacked, 0), np.nanmin(stacked, 0), np.nanmax(stacked, 0)


def plot_runs(run_dirs: list[str | Path], out: str | Path) -> Path:
    """Write the figure to ``out`` (PNG) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[dict]] = defaultdict(list)
    for run_dir in map(Path, run_dirs):
        metrics_path = run_dir / "metrics.csv"
        if not metrics_path.exists():
            raise FileNotFoundError(f"{run_dir} has no metrics.csv; pass run folders written by "
                                    "`agentic-rl train`")
        groups[experiment_label(run_dir)].append(read_metrics(metrics_path))
    has_losses = any(OPD_LOSSES[1] in m for runs in groups.values() for m in runs)
    figure, axes = plt.subplots(1, 2 if has_losses else 1, figsize=(12 if has_losses else 6, 4))
    axes = np.atleast_1d(axes)
    for label, runs in groups.items():
        curves = [m["eval/success_rate"] for m in runs if "eval/success_rate" in m]
        if curves:
            steps, mean, low, high = mean_and_spread(curves)
            axes[0].plot(steps, mean, label=f"{label} (n={len(curves)})")
            axes[0].fill_between(steps, low, high, alpha=0.25)
        if has_losses:
            for key, style in zip(OPD_LOSSES, ("-", "--", ":")):
                loss_curves = [m[key] for m in runs if key in m]
                if loss_curves:
                    steps, mean, _, _ = mean_and_spread(loss_curves)
                    axes[1].plot(steps, mean, style, label=f"{label}: {key.split('/')[1]}")
    axes[0].set(xlabel="env steps", ylabel="eval success rate", ylim=(-0.02, 1.02),
                title="Evaluation success (mean, min-max over seeds)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8)
    if has_losses:
        axes[1].set(xlabel="env steps", ylabel="loss", title="OPD actor losses")
        axes[1].legend(fontsize=7)
    figure.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
