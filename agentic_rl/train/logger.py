"""Scalars to TensorBoard and to ``metrics.csv`` (long format: step, wall_time, key, value).

The CSV is appended and flushed on every ``log`` call, so a crash loses nothing already logged;
on ``--resume`` rows after the checkpoint's step are dropped before logging continues.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

CSV_HEADER = ["step", "wall_time", "key", "value"]


class Logger:
    """Writes namespaced scalars (``rollout/``, ``eval/``, ``losses/``, ``train/``, ``time/``)."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True,
                 purge_step: int | None = None) -> None:
        """``purge_step``: the step a resumed run continues from; TensorBoard events logged
        after it are dropped (those at it belong to the checkpoint and stay)."""
        self.run_dir = Path(run_dir)
        self.csv_path = self.run_dir / "metrics.csv"
        new_file = not self.csv_path.exists()
        self._csv_file = open(self.csv_path, "a", newline="")
        self._csv = csv.writer(self._csv_file)
        if new_file:
            self._csv.writerow(CSV_HEADER)
            self._csv_file.flush()
        self._writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=(
                None if purge_step is None else purge_step + 1))
        self.latest: dict[str, float] = {}

    def log(self, step: int, metrics: dict[str, float]) -> None:
        now = time.time()
        for key, value in metrics.items():
            value = float(value)
            self._csv.writerow([step, f"{now:.3f}", key, repr(value)])
            if self._writer is not None:
                self._writer.add_scalar(key, value, step)
            self.latest[key] = value
        self._csv_file.flush()

    def close(self) -> None:
        self._csv_file.close()
        if self._writer is not None:
            self._writer.close()


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
