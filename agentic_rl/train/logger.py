"""Scalars to ``metrics.csv`` (long format: step, wall_time, key, value), TensorBoard and
Weights & Biases, as ``training.loggers`` chooses (csv and TensorBoard by default).

The CSV is appended and flushed on every ``log`` call, so a crash loses nothing already logged;
on ``--resume`` rows after the checkpoint's step are dropped before logging continues. WandB runs
offline (files under ``RUN_DIR/wandb``, ``wandb sync`` uploads them) unless
``training.wandb_mode`` is ``online``; a resumed run continues the same WandB run.
"""

from __future__ import annotations

import csv
import os
import time
import uuid
from pathlib import Path
from typing import Any

from agentic_rl.config import ConfigError, ExperimentConfig

CSV_HEADER = ["step", "wall_time", "key", "value"]
WANDB_ID_FILE = "wandb_id"


class Logger:
    """Writes namespaced scalars (``rollout/``, ``eval/``, ``losses/``, ``train/``, ``time/``).

    Args:
        run_dir: the run folder.
        loggers: any of ``csv``, ``tensorboard``, ``wandb``.
        purge_step: the step a resumed run continues from; TensorBoard events logged after it
            are dropped (those at it belong to the checkpoint and stay).
        wandb: ``{"project", "mode", "config"}`` for a WandB run (with ``wandb`` in loggers).
    """

    def __init__(self, run_dir: str | Path, loggers: tuple[str, ...] = ("tensorboard", "csv"),
                 purge_step: int | None = None, wandb: dict[str, Any] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.csv_path = self.run_dir / "metrics.csv"
        self._csv_file = self._csv = self._writer = self._wandb = None
        if "csv" in loggers:
            new_file = not self.csv_path.exists()
            self._csv_file = open(self.csv_path, "a", newline="")
            self._csv = csv.writer(self._csv_file)
            if new_file:
                self._csv.writerow(CSV_HEADER)
                self._csv_file.flush()
        if "tensorboard" in loggers:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=(
                None if purge_step is None else purge_step + 1))
        if "wandb" in loggers:
            self._wandb = start_wandb(self.run_dir, **(wandb or {}))
        self.latest: dict[str, float] = {}

    def log(self, step: int, metrics: dict[str, float]) -> None:
        now = time.time()
        values = {key: float(value) for key, value in metrics.items()}
        for key, value in values.items():
            if self._csv is not None:
                self._csv.writerow([step, f"{now:.3f}", key, repr(value)])
            if self._writer is not None:
                self._writer.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(values, step=step)
        self.latest.update(values)
        if self._csv_file is not None:
            self._csv_file.flush()

    def close(self) -> None:
        if self._csv_file is not None:
            self._csv_file.close()
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()


def open_logger(config: ExperimentConfig, run_dir: str | Path,
                purge_step: int | None = None) -> Logger:
    """The ``Logger`` ``config.training`` asks for."""
    training = config.training
    return Logger(run_dir, tuple(training.loggers), purge_step,
                  {"project": training.wandb_project, "mode": training.wandb_mode,
                   "config": config.model_dump(mode="json")})


def start_wandb(run_dir: Path, project: str = "agentic-rl", mode: str = "offline",
                config: dict[str, Any] | None = None):
    """A WandB run for ``run_dir``: the id is kept in ``RUN_DIR/wandb_id``, so ``--resume``
    continues the same run."""
    try:
        import wandb
    except ModuleNotFoundError:
        raise ConfigError("training.loggers includes wandb, which is not installed: "
                          "pip install 'agentic-rl[wandb]'") from None
    id_file = run_dir / WANDB_ID_FILE
    if not id_file.exists():
        id_file.write_text(uuid.uuid4().hex[:12])
    return wandb.init(project=project, mode=mode, dir=str(run_dir), name=run_dir.name,
                      id=id_file.read_text().strip(), resume="allow", config=config or {})


def truncate_metrics(csv_path: str | Path, last_step: int) -> None:
    """Drop rows logged after ``last_step`` (they will be logged again by the resumed run)."""
    csv_path = Path(csv_path)
    if not csv_path.exists():
        return
    with open(csv_path, newline="") as handle:
        rows = list(csv.reader(handle))
    kept = [rows[0]] + [row for row in rows[1:] if len(row) == 4 and int(row[0]) <= last_step]
    temporary = csv_path.with_suffix(".csv.tmp")
    with open(temporary, "w", newline="") as handle:
        csv.writer(handle).writerows(kept)
    os.replace(temporary, csv_path)


def read_metrics(csv_path: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(step, value), ...]}`` from a ``metrics.csv``; tolerates a torn last line."""
    series: dict[str, list[tuple[int, float]]] = {}
    with open(csv_path, newline="") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for row in reader:
            if len(row) != 4:
                continue
            try:
                series.setdefault(row[2], []).append((int(row[0]), float(row[3])))
            except ValueError:
                continue
    return series
