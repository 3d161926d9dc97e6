"""Benchmark scripts that reach into the library: the two profiling scripts drive the loop's
parts by hand (collector, storage, update), and the curiosity ablation edits config files. A
change to either contract must break this test, not the scripts, found only when someone runs
them."""

from __future__ import annotations

import importlib.util
import sys

from agentic_rl.config import validate_config
from tests.conftest import REPO


def _script(name: str):
    path = REPO / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # the scripts import benchmarks/common.py
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_profile_step_times_every_phase_of_a_few_steps():
    ms, _ = _script("profile_step").profile([16, 16], steps=20, algo="sac", warmup=260)
    assert set(ms) == {"act", "env step", "store", "episode end", "sample", "update"}
    assert all(value > 0 for value in ms.values())


def test_update_floor_fills_a_replay_and_times_updates():
    floor = _script("update_floor")
    run = floor.build_filled_run([16, 16], batch=32, threads=1, fill_steps=60)
    assert run.storage.replay.num_sampleable() > 0
    assert floor.updates_per_s(run, batch=32, seconds=0.05) > 0


def test_every_curiosity_variant_is_a_valid_config():
    """``curiosity.py``'s variants are config files less some keys: a renamed file or key
    must fail here, not an hour into an ablation."""
    curiosity = _script("curiosity")
    for name in curiosity.VARIANTS:
        config = validate_config(curiosity.variant_config(name))
        removed = curiosity.VARIANTS[name][1]
        assert all(getattr(config.algorithm, key) is None for key in removed), name
