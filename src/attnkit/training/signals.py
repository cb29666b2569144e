"""SIGINT/SIGTERM turn into a stop request (`StopRequest`: the trainer finishes the step,
checkpoints, exits) or, outside its steps, into `Interrupted` (`interruptible`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType

from attnkit.errors import Interrupted

__all__ = ["Interrupted", "StopRequest", "interruptible"]


@contextmanager
def _handling(handle: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """``handle`` SIGINT and SIGTERM while inside, then the previous handlers again; nothing
    changes outside the main thread (where Python cannot install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


class StopRequest:
    """While used as a context manager, SIGINT and SIGTERM are recorded (``signum``,
    ``name``) instead of killing the process; a second SIGINT raises KeyboardInterrupt at once
    (the user insists).

    Example:
        >>> with StopRequest() as stop:
        ...     while not stop.signum: ...
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._handling = _handling(self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def __enter__(self) -> StopRequest:
        self._handling.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._handling.__exit__(None, None, None)


def interruptible() -> AbstractContextManager[None]:
    """While inside, SIGINT and SIGTERM raise `Interrupted` (a trainer's `StopRequest` inside
    takes over during its steps, then gives them back).

    Example:
        >>> with interruptible():
        ...     pass   # a SIGTERM here raises Interrupted instead of killing the process
    """
    def handle(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)
    return _handling(handle)
