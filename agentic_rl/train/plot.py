"""Learning-curve figures (SPEC D1): eval success vs env steps (mean and spread over runs of
the same experiment: same resolved config but for the seed) and the three OPD actor losses."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from agentic_rl.train.logger import read_metrics

OPD_LOSSES = ("losses/actor_sac_loss", "losses/actor_distill_loss", "losses/actor_total_loss")


# Keys that do not change what a run learns: runs differing only here are seeds of one curve.
BOOKKEEPING = ("training.seed", "training.total_timesteps", "training.checkpoint_freq",
               "training.log_freq", "training.torch_threads", "training.device")


def flat_config(run_dir: Path) -> dict[str, str]:
    """The run's resolved config as ``{dotted key: value text}`` (strings as they are, other
    values as JSON; empty without config.yaml)."""
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        return {}

    def flatten(node, prefix: str) -> dict[str, str]:
        if isinstance(node, dict):
            return {k: v for key, child in node.items()
                    for k, v in flatten(child, f"{prefix}{key}.").items()}
        return {prefix[:-1]: node if isinstance(node, str) else json.dumps(node)}

    return flatten(yaml.safe_load(config_path.read_text()) or {}, "")


def group_runs(configs: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Runs with the same resolved config (seeds and bookkeeping aside) share a curve; each
    label is ``algorithm env`` plus the keys whose values differ between the curves."""
    def experiment(flat: dict[str, str]) -> tuple:
        return tuple(sorted((k, v) for k, v in flat.items() if k not in BOOKKEEPING))

    groups: dict[tuple, list[str]] = defaultdict(list)
    for run, flat in configs.items():
        groups[experiment(flat) if flat else (("run", run),)].append(run)
    configured = [dict(key) for key in groups if "run" not in dict(key)]
    keys = {k for values in configured for k in values}
    differing = sorted(k for k in keys if len({values.get(k) for values in configured}) > 1
                       and k not in ("algorithm.name", "environment.name"))
    labels: dict[str, list[str]] = {}
    for key, runs in groups.items():
        values = dict(key)
        if "run" in values:
            labels[Path(values["run"]).name] = runs
            continue
        base = f"{values.get('algorithm.name', '?')} {values.get('environment.name', '?')}"
        extra = ", ".join(f"{k}={values.get(k, '-')}" for k in differing)
        labels[f"{base} ({extra})" if extra else base] = runs
    return labels


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

    for run_dir in map(Path, run_dirs):
        if not (run_dir / "metrics.csv").exists():
            raise FileNotFoundError(f"{run_dir} has no metrics.csv; pass run folders written by "
                                    "`agentic-rl train`")
    labels = group_runs({str(run_dir): flat_config(Path(run_dir)) for run_dir in run_dirs})
    groups = {label: [read_metrics(Path(run) / "metrics.csv") for run in runs]
              for label, runs in labels.items()}
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
