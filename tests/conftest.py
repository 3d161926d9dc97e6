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
