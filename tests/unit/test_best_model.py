"""``RUN_DIR/best``: which evaluation's learner a run keeps (in-run and final evaluations)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from agentic_rl.data.checkpoint import read_model_meta
from agentic_rl.train.evaluate import EvalResult
from agentic_rl.train.loop import keep_if_best


class Learner:
    def __init__(self, value: float):
        self.weight = torch.full((2,), value)

    def state_dict(self) -> dict:
        return {"weight": self.weight.clone()}


def run_at(tmp_path, step: int, history: list[float], value: float) -> SimpleNamespace:
    history_rows = [{"step": 100 * (i + 1), "success_rate": s} for i, s in enumerate(history)]
    return SimpleNamespace(run_dir=tmp_path, step=step, eval_history=history_rows,
                           algo=Learner(value))


def result(success: float) -> EvalResult:
    return EvalResult(success_rate=success, mean_return=0.0, mean_length=1.0)


def test_a_final_evaluation_better_than_every_in_run_one_replaces_best(tmp_path):
    assert keep_if_best(run_at(tmp_path, 100, [], 1.0), result(0.90))
    assert keep_if_best(run_at(tmp_path, 720, [0.90, 0.85], 2.0), result(0.93), final=True)
    meta = read_model_meta(tmp_path / "best")
    assert meta["step"] == 720 and meta["final"] and meta["eval"]["success_rate"] == 0.93


def test_a_worse_final_evaluation_leaves_best_alone_and_ties_go_to_the_later(tmp_path):
    assert keep_if_best(run_at(tmp_path, 100, [], 1.0), result(0.90))
    assert not keep_if_best(run_at(tmp_path, 720, [0.90, 0.85], 2.0), result(0.89), final=True)
    assert read_model_meta(tmp_path / "best")["step"] == 100
    assert keep_if_best(run_at(tmp_path, 720, [0.90, 0.85], 2.0), result(0.90), final=True)
    assert read_model_meta(tmp_path / "best")["step"] == 720


def test_a_resumed_run_keeps_the_final_best_of_its_earlier_session(tmp_path):
    assert keep_if_best(run_at(tmp_path, 720, [0.90], 2.0), result(0.95), final=True)
    # resumed at 720 with a larger budget: 0.92 is under the earlier session's final 0.95
    assert not keep_if_best(run_at(tmp_path, 800, [0.90], 3.0), result(0.92))
    assert read_model_meta(tmp_path / "best")["step"] == 720
    # resumed from an earlier checkpoint (step 300): best/ is from steps it will redo
    assert keep_if_best(run_at(tmp_path, 400, [0.90], 4.0), result(0.92))
    assert read_model_meta(tmp_path / "best")["step"] == 400


def test_no_model_folder_has_no_meta(tmp_path):
    assert read_model_meta(tmp_path / "best") is None


def test_best_already_holding_this_steps_learner_is_not_written_again(tmp_path):
    assert keep_if_best(run_at(tmp_path, 1000, [0.5], 1.0), result(0.90))
    written = (tmp_path / "best" / "model.safetensors").stat().st_mtime_ns
    # the final evaluation at the step of the last in-run one: the same learner
    assert not keep_if_best(run_at(tmp_path, 1000, [0.5, 0.90], 1.0), result(0.90), final=True)
    assert (tmp_path / "best" / "model.safetensors").stat().st_mtime_ns == written
