"""The project's own error types. Anything the user can get wrong raises one of these."""

from __future__ import annotations

import signal


class AttnkitError(Exception):
    """Base class of every error attnkit raises on purpose (bad input, bad files, bad runs)."""


class DataError(AttnkitError, ValueError):
    """A data file or record is malformed. The message names the file and line (or member)."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = "" if path is None else f"{path}: " if line is None else f"{path}:{line}: "
        super().__init__(where + message)
        self.path, self.line = path, line


class CheckpointError(AttnkitError):
    """A checkpoint or run folder is missing, truncated, altered or from another model."""


class DownloadError(AttnkitError):
    """A download failed or its checksum did not match."""


class TrainingError(AttnkitError):
    """A run cannot go on: non-finite loss, a failing rank, an unusable batch plan."""


class UsageError(AttnkitError, ValueError):
    """An option value or combination the user gave cannot work (e.g. a resume that would
    change the run's seed, an empty input)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM where work cannot stop at a step boundary (loading, the final evaluation).
    A BaseException, so no ``except Exception`` swallows it; the command line exits
    ``128 + signum``. ``hint``: what the user can do next (resume the run...), or None."""

    def __init__(self, signum: int, hint: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.hint = hint


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most 200 characters): what a one-line error or
    warning quotes of an exception from code it does not own."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "(no message)"
