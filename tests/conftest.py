"""Shared fixtures: one torch thread (2-core CI), repository paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def assert_same_final_weights(run_a: Path, run_b: Path) -> None:
    """The latest checkpoints of two run folders hold bit-identical tensors."""
    from safetensors.torch import load_file

    from agentic_rl.data.checkpoint import latest_checkpoint

    final_a = load_file(latest_checkpoint(run_a) / "model.safetensors")
    final_b = load_file(latest_checkpoint(run_b) / "model.safetensors")
    assert final_a.keys() == final_b.keys()
    for key in final_a:
        assert (final_a[key] == final_b[key]).all(), key
