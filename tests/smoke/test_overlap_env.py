"""``training.overlap_env``: envs step in a worker process while the learner updates; a
crashed run resumes bit-exactly from its checkpoint (that it still learns:
tests/slow/test_learning.py)."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from agentic_rl.cli import main
from tests.smoke.test_cli import crash_after, point_args

OVERLAP = "training.overlap_env=true"


def test_overlapped_run_resumes_after_a_crash_with_the_same_weights(tmp_path, monkeypatch):
    steps = "training.total_timesteps=400"
    assert main(["train", *point_args(tmp_path / "a", steps, OVERLAP)]) == 0
    with monkeypatch.context() as patch:
        crash_after(patch, 310)
        with pytest.raises(RuntimeError, match="simulated crash"):
            main(["train", *point_args(tmp_path / "b", steps, OVERLAP)])
    assert main(["train", *point_args(tmp_path / "b", steps, OVERLAP, "--resume")]) == 0
    final = [load_file(tmp_path / name / "runs" / "opd_point_seed0" / "checkpoints"
                       / "step_000000400" / "model.safetensors") for name in ("a", "b")]
    assert final[0].keys() == final[1].keys()
    for key in final[0]:
        assert (final[0][key] == final[1][key]).all(), key
