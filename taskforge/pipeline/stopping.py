"""Stopping a run early without losing its work: SIGTERM/SIGINT and a time cap become one exception.

``RunStopped`` is a ``BaseException`` so that no ``except Exception`` of a stage (the executors return
exceptions as values) swallows it; ``generate`` catches it (and ``KeyboardInterrupt``), writes every
task accepted so far, closes the dataset (manifest included) and reports the stop as the run's error.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType


class RunStopped(BaseException):
    """The run was asked to stop (``why``: ``"SIGTERM"``, ``"time cap of 10 min reached"``...)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def stop_reason(exc: BaseException) -> str:
    """One line for an exception that stopped the run."""
    return exc.why if isinstance(exc, RunStopped) else "SIGINT (Ctrl-C)"


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Inside, SIGTERM raises ``RunStopped("SIGTERM")`` in the main thread (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: FrameType | None) -> None:
        raise RunStopped(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True, slots=True)
class Deadline:
    """A wall-clock cap of a whole run (``None``: none)."""

    at: float | None = None
    minutes: float = 0.0

    @classmethod
    def after(cls, minutes: float | None) -> Deadline:
        return cls(time.monotonic() + minutes * 60, minutes) if minutes else cls()

    def check(self) -> None:
        """Raise ``RunStopped`` once the cap is reached."""
        if self.at is not None and time.monotonic() >= self.at:
            raise RunStopped(f"time cap of {self.minutes:g} min reached")
