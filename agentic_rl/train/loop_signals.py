"""Ctrl-C in the training loop: the first SIGINT becomes a flag the loop reads once per step,
so it stops at a consistent point, checkpoints, and raises ``CheckpointedInterrupt``; a second
SIGINT interrupts at once."""

from __future__ import annotations

import signal
import threading


class CheckpointedInterrupt(KeyboardInterrupt):
    """Training stopped on Ctrl-C after writing a checkpoint at ``step``."""

    def __init__(self, step: int) -> None:
        super().__init__(f"interrupted at step {step}")
        self.step = step

    def __reduce__(self):  # across processes (benchmarks' process pools) with its step
        return type(self), (self.step,)


class CtrlC:
    """Context manager: ``pressed`` turns True on the first SIGINT (main thread only)."""

    def __init__(self) -> None:
        self.pressed = False
        self.previous = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
