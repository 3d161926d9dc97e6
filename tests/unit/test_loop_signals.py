"""Ctrl-C's exception keeps its step when it crosses a process boundary (a benchmark's pool)."""

from __future__ import annotations

import pickle

from agentic_rl.train.loop_signals import CheckpointedInterrupt


def test_checkpointed_interrupt_survives_pickling_with_its_step():
    copy = pickle.loads(pickle.dumps(CheckpointedInterrupt(11164)))
    assert isinstance(copy, KeyboardInterrupt) and copy.step == 11164
    assert str(copy) == "interrupted at step 11164"
