"""Checkpoint files: atomic layout, round trip, and clear errors for broken ones."""

import numpy as np
import pytest
import torch

from agentic_rl.data.checkpoint import (CheckpointError, latest_checkpoint, load_checkpoint,
                                         save_checkpoint)


def test_round_trip_and_keep_last(tmp_path):
    for step in (10, 20, 30):
        save_checkpoint(tmp_path / "checkpoints", step, {"w": torch.full((2,), float(step))},
                        {"step": step}, {"buf": np.arange(step)}, keep=2)
    folder = latest_checkpoint(tmp_path)
    assert folder.name == "step_000000030"
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == [
        "step_000000020", "step_000000030"]
    tensors, state, buffers = load_checkpoint(folder)
    assert torch.equal(tensors["w"], torch.full((2,), 30.0))
    assert state == {"step": 30} and len(buffers["buf"]) == 30


def test_truncated_model_file_is_reported(tmp_path):
    folder = save_checkpoint(tmp_path / "checkpoints", 1, {"w": torch.zeros(1000)}, {}, {})
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(folder)


def test_missing_parts_and_missing_run(tmp_path):
    folder = save_checkpoint(tmp_path / "checkpoints", 1, {"w": torch.zeros(1)}, {}, {})
    (folder / "buffers.npz").unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        load_checkpoint(folder)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        latest_checkpoint(tmp_path / "elsewhere")
