"""Checkpoints (SPEC C4): tensors in safetensors, metadata in JSON, buffers in ``.npz``.

Layout: ``RUN_DIR/checkpoints/step_000001000/{model.safetensors, state.json, buffers.npz}`` and
``RUN_DIR/checkpoints/latest`` naming the newest complete one. A checkpoint is written into a
temporary folder and renamed into place, and ``latest`` is replaced atomically, so a crash at
any moment leaves the previous checkpoint intact. Loading never unpickles anything.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

MODEL_FILE, STATE_FILE, BUFFERS_FILE = "model.safetensors", "state.json", "buffers.npz"
BEST_DIR = "best"  # RUN_DIR/best: the learner of the best evaluation so far


class CheckpointError(RuntimeError):
    """A checkpoint is missing, truncated or corrupt."""


def save_checkpoint(checkpoint_root: str | Path, step: int, tensors: dict[str, torch.Tensor],
                    state: dict[str, Any], buffers: dict[str, np.ndarray], keep: int = 2) -> Path:
    """Write one checkpoint atomically and point ``latest`` at it; keep the newest ``keep``."""
    root = Path(checkpoint_root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:09d}"
    temporary = root / f".tmp_step_{step:09d}"
    for stale in root.glob(".tmp_step_*"):  # left by a write that was killed
        shutil.rmtree(stale, ignore_errors=True)
    temporary.mkdir()
    write_folder(temporary, final, tensors, state, buffers)
    pointer = root / "latest.tmp"
    pointer.write_text(final.name)
    os.replace(pointer, root / "latest")
    for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The newest complete checkpoint of a run (``RUN_DIR`` or a checkpoint folder itself):
    the one ``latest`` names, or, where that was deleted, the newest complete ``step_*``."""
    path = Path(run_dir)
    if (path / MODEL_FILE).exists():
        return path
    root = path / "checkpoints"
    pointer = root / "latest"
    named = root / pointer.read_text().strip() if pointer.exists() else None
    if named is not None and named.is_dir():
        return named
    complete = [p for p in sorted(root.glob("step_*")) if p.is_dir() and all(
        (p / name).exists() for name in (MODEL_FILE, STATE_FILE, BUFFERS_FILE))]
    if not complete:
        raise CheckpointError(f"no checkpoint in {path}; train first (`agentic-rl train CONFIG "
                              f"--log-dir ...`) or pass a run folder that has checkpoints/")
    return complete[-1]


def has_checkpoint(run_dir: str | Path) -> bool:
    try:
        latest_checkpoint(run_dir)
    except CheckpointError:
        return False
    return True


def load_checkpoint(folder: str | Path, with_buffers: bool = True):
    """Read ``(tensors, state, buffers)``; any unreadable part raises ``CheckpointError``."""
    folder = Path(folder)
    parts = [MODEL_FILE, STATE_FILE] + ([BUFFERS_FILE] if with_buffers else [])
    missing = [name for name in parts if not (folder / name).exists()]
    if missing:
        raise CheckpointError(f"checkpoint {folder} is incomplete (missing {missing}); resume "
                              "from an earlier checkpoint or start a fresh run")
    try:
        tensors = load_file(str(folder / MODEL_FILE))
        state = json.loads((folder / STATE_FILE).read_text())
        buffers: dict[str, np.ndarray] = {}
        if with_buffers:
            with np.load(folder / BUFFERS_FILE, allow_pickle=False) as data:
                buffers = {k: data[k] for k in data.files}
    except Exception as error:  # safetensors/json/zip errors all mean the same to the user
        raise CheckpointError(f"checkpoint {folder} is corrupt or truncated "
                              f"({type(error).__name__}: {error}); delete it and resume from "
                              "an earlier checkpoint, or start a fresh run") from None
    return tensors, state, buffers


def load_learner(algo, folder: str | Path) -> dict[str, Any]:
    """Load a learner's state (saved under ``algo.`` by either loop) from a checkpoint folder,
    without its buffers; returns the checkpoint's JSON metadata."""
    tensors, meta, _ = load_checkpoint(folder, with_buffers=False)
    if "algo" not in meta:
        raise CheckpointError(f"checkpoint {folder} has no learner state under 'algo' (written "
                              "by an older agentic-rl); retrain, or load it with that version")
    load_algo_state(algo, meta, tensors, folder)
    return meta


def read_model_meta(folder: str | Path) -> dict[str, Any] | None:
    """The JSON metadata of a model folder or checkpoint (``step``, ``eval``, ...), or
    ``None`` where there is none yet."""
    path = Path(folder) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def load_algo_state(algo, meta: dict[str, Any], tensors: dict[str, torch.Tensor],
                    folder: str | Path) -> None:
    """``algo.load_state_dict`` from a checkpoint; a checkpoint of another config (other
    sizes, spaces or algorithm) is one ``CheckpointError`` line, not torch's traceback."""
    try:
        algo.load_state_dict(unflatten_state(meta["algo"], tensors))
    except (RuntimeError, KeyError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"checkpoint {folder} does not fit this config ({first[:160]}); "
                              "use the config it was trained with (its run folder's "
                              "config.yaml)") from None


def save_model(folder: str | Path, algo, extra: dict[str, Any],
               config_file: str | Path | None = None) -> None:
    """A learner's state alone (what ``eval`` and ``models/`` need; ``load_learner`` reads
    it), with ``extra`` in its JSON and a copy of ``config_file`` as ``config.yaml`` (so the
    folder is a model folder ``agentic-rl eval`` takes as it is); replaced atomically."""
    _write_model(folder, algo.state_dict(), extra, config_file)


def _write_model(folder: str | Path, state: Any, extra: dict[str, Any],
                 config_file: str | Path | None) -> None:
    folder = Path(folder)
    tensors, skeleton = flatten_state(state)
    temporary = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    if config_file is not None and Path(config_file).exists():
        shutil.copyfile(config_file, temporary / "config.yaml")
    write_folder(temporary, folder, tensors, {"algo": skeleton, **extra})


TRAINING_ONLY = ("optimizer", "generator", "updates")  # learner state a model folder drops


def export_model(source: str | Path, destination: str | Path) -> None:
    """Write a model folder (``models/alfworld``) from a run's ``best/`` or checkpoint: the
    learner's weights, without its optimisers, generator and update count, with the source's
    ``config.yaml`` and metadata."""
    tensors, meta, _ = load_checkpoint(source, with_buffers=False)
    state = _without(unflatten_state(meta["algo"], tensors), TRAINING_ONLY)
    extra = {k: v for k, v in meta.items() if k != "algo"}
    _write_model(destination, state, extra, Path(source) / "config.yaml")


def _without(state: Any, keys: tuple[str, ...]) -> Any:
    """A nested state dict with ``keys`` removed at every level."""
    if not isinstance(state, dict):
        return state
    return {k: _without(v, keys) for k, v in state.items() if k not in keys}


def write_folder(temporary: Path, final: Path, tensors: dict[str, torch.Tensor],
                 state: dict[str, Any], buffers: dict[str, np.ndarray] | None = None) -> None:
    """Write tensors, JSON state and (optionally) buffers into the empty folder ``temporary``,
    flush them to disk, and move it to ``final`` (replacing what was there)."""
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()},
              str(temporary / MODEL_FILE))
    (temporary / STATE_FILE).write_text(json.dumps(state))
    if buffers is not None:
        with open(temporary / BUFFERS_FILE, "wb") as handle:
            np.savez(handle, **buffers)
    for path in temporary.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(temporary, final)


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json`` atomically (a crash leaves the previous one or none)."""
    temporary = Path(run_dir) / "summary.json.tmp"
    temporary.write_text(json.dumps(summary, indent=2))
    os.replace(temporary, Path(run_dir) / "summary.json")


def prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """Select the arrays under ``prefix/`` and strip it."""
    start = len(prefix) + 1
    return {k[start:]: v for k, v in arrays.items() if k.startswith(prefix + "/")}


def with_prefix(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": v for k, v in arrays.items()}


def flatten_state(state: Any, prefix: str = "") -> tuple[dict[str, torch.Tensor], dict]:
    """Split a nested state dict (modules, optimisers, generators) into safetensors-ready
    tensors under dotted keys and a JSON-ready skeleton with the other leaves."""
    tensors: dict[str, torch.Tensor] = {}
    if torch.is_tensor(state):
        tensors[prefix] = state
        return tensors, {"__tensor__": prefix}
    if isinstance(state, dict):
        skeleton = {}
        for key, value in state.items():
            sub_tensors, sub = flatten_state(value, f"{prefix}.{key}" if prefix else str(key))
            tensors |= sub_tensors
            skeleton[str(key)] = sub
        return tensors, {"__dict__": skeleton, "__int_keys__": all(
            isinstance(k, int) for k in state) and bool(state)}
    if isinstance(state, (list, tuple)):
        items = [flatten_state(v, f"{prefix}.{i}") for i, v in enumerate(state)]
        for sub_tensors, _ in items:
            tensors |= sub_tensors
        return tensors, {"__list__": [sub for _, sub in items]}
    return tensors, {"__value__": state}


def unflatten_state(skeleton: dict, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of ``flatten_state`` (integer dict keys, e.g. optimiser state ids, restored)."""
    if "__tensor__" in skeleton:
        return tensors[skeleton["__tensor__"]]
    if "__dict__" in skeleton:
        convert = int if skeleton.get("__int_keys__") else str
        return {convert(k): unflatten_state(v, tensors) for k, v in skeleton["__dict__"].items()}
    if "__list__" in skeleton:
        return [unflatten_state(v, tensors) for v in skeleton["__list__"]]
    return skeleton["__value__"]
