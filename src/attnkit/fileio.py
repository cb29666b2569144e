"""Atomic file writes: a temporary file in the same folder, then ``os.replace``.

A reader never sees a half-written file, and a run killed mid-write leaves the previous file
intact; replacing a file never writes through a link in its place (the link itself is
replaced). The two writes that cannot be atomic, appending to a log and cutting it back on a
resume, refuse a link instead. Every module that writes a user-visible file goes through here.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attnkit.errors import CheckpointError


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it goes.

    For writers that want a file name (``safetensors.save_file``, sentencepiece, savefig):
        ```python
        with atomic_path("w.safetensors") as tmp:
            save_file(tensors, tmp)
        ```
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; run folders are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        # Leave no half-written temp file behind; the error itself propagates.
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path`` as a Path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path`` as a Path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _no_follow(path: Path, flags: int) -> int:
    """``os.open`` that refuses a link in the file's place (ELOOP becomes a clear error)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CheckpointError(f"{path} is a link; attnkit does not write through links "
                                  "in a run folder (replace it with a plain file)") from None
        raise


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append ``text`` (UTF-8) to ``path`` in one write; a link in its place is refused."""
    fd = _no_follow(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "ab") as f:
        f.write(text.encode("utf-8"))


def truncate_file(path: str | os.PathLike, size: int) -> None:
    """Cut ``path`` to ``size`` bytes (creating it empty when missing); a link is refused."""
    fd = _no_follow(Path(path), os.O_WRONLY | os.O_CREAT)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def read_limited(path: str | os.PathLike, what: str, *, limit: int | None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (None: any size).

    A device or a pipe in a file's place (``/dev/zero``, ``/dev/urandom``) would hang or fill
    memory, and a huge file the same: each is one error naming the file.

    Raises:
        CheckpointError: missing, not a regular file, larger than ``limit``, unreadable.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CheckpointError(f"{path}: {what} is not a regular file (a device, pipe "
                                      "or socket)")
            data = f.read(-1 if limit is None else limit + 1)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: {what} is missing") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: {what} is a folder, not a file") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if limit is not None and len(data) > limit:
        raise CheckpointError(f"{path}: {what} is larger than {limit:,} bytes; it is not one "
                              "attnkit wrote")
    return data
