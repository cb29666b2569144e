"""SIGINT/SIGTERM turn into a stop request: the trainer finishes the step, checkpoints, exits."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from attnkit.errors import Interrupted

__all__ = ["Interrupted", "StopRequest", "interruptible"]


class StopRequest:
    """Installs handlers for SIGINT and SIGTERM that record the signal instead of dying.

    A second SIGINT raises KeyboardInterrupt at once (the user insists). Use as a context
    manager; the previous handlers come back on exit. Outside the main thread (where Python
    cannot install handlers) it does nothing.

    Example:
        >>> with StopRequest() as stop:
        ...     while not stop.signum: ...
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()


@contextmanager
def interruptible() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise `Interrupted` (a trainer's
    `StopRequest` inside takes over during its steps, then gives them back).

    Example:
        >>> with interruptible():
        ...     pass   # a SIGTERM here raises Interrupted instead of killing the process
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
