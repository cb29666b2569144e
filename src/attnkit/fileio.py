"""Atomic file writes: a temporary file in the same folder, then ``os.replace``.

A reader never sees a half-written file, and a run killed mid-write leaves the previous file
intact. Every module that writes a user-visible file goes through here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it goes.

    For writers that want a file name (``safetensors.save_file``, sentencepiece, savefig)::

        with atomic_path("w.safetensors") as tmp:
            save_file(tensors, tmp)
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
