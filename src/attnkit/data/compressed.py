"""Opening a data file that may be gzip-compressed (told by its first bytes) and reading it
within the bounds every data reader keeps: `MAX_DATA_BYTES` of text per file once
decompressed, `MAX_LINE_BYTES` per record; names from the data kept inside their folder
(`outside_reason`). Why: docs/concepts.md, "Data"."""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from attnkit.data.drops import BadRecord
from attnkit.errors import DataError

# Far beyond any corpus this toolkit trains on (Tatoeba's pairs are 40 MB, IMDB's reviews
# 130 MB), far below what would bring a 24 GB machine down once held as Python strings.
MAX_DATA_BYTES = 512 << 20
# One line or record: IMDB's longest review is 14 KB.
MAX_LINE_BYTES = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
# What a damaged gzip stream raises while it is read.
CORRUPT_STREAM = (EOFError, zlib.error, gzip.BadGzipFile)


def data_file(path: str | os.PathLike) -> Path:
    """``path`` when it is a regular file; else DataError: missing, a folder, or a device, pipe or
    socket (``/dev/zero`` never ends)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise DataError("no such file or folder" if isinstance(exc, FileNotFoundError)
                        else f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    if stat.S_ISDIR(mode):
        raise DataError("is a folder, not a data file", path=str(path))
    if not stat.S_ISREG(mode):
        raise DataError("is a device, pipe or socket, not a data file", path=str(path))
    return path


def open_maybe_gzip(path: str | os.PathLike) -> BinaryIO:
    """A binary stream of ``path``'s content (`data_file`), decompressed if it starts like gzip.
    A corrupt gzip stream raises later, while reading (``gzip.BadGzipFile``, ``EOFError``,
    ``zlib.error``)."""
    path = data_file(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc


def capped_lines(stream: BinaryIO, path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """``(number, raw line)`` of a data stream, 1-based, each at most `MAX_LINE_BYTES`, all
    together at most `MAX_DATA_BYTES` (else DataError)."""
    total = 0
    for number in range(1, 1 << 62):
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise DataError(f"a line longer than {MAX_LINE_BYTES:,} bytes, more than any record "
                            "attnkit reads: not a data file?", path=str(path), line=number)
        total += len(raw)
        if total > MAX_DATA_BYTES:
            raise DataError(too_much_data(), path=str(path), line=number)
        yield number, raw


def read_data_stream(stream: BinaryIO, path: str | os.PathLike) -> bytes:
    """The whole content of a data stream, at most `MAX_DATA_BYTES` (else DataError)."""
    data = stream.read(MAX_DATA_BYTES + 1)
    if len(data) > MAX_DATA_BYTES:
        raise DataError(too_much_data(), path=str(path))
    return data


def read_data(path: str | os.PathLike) -> bytes:
    """The content of a data file (gzip or plain), at most `MAX_DATA_BYTES`; DataError as
    `open_maybe_gzip`, or for a corrupt gzip stream or a longer file."""
    with open_maybe_gzip(path) as f:
        try:
            return read_data_stream(f, path)
        except (*CORRUPT_STREAM, OSError) as exc:
            raise DataError(f"corrupt or truncated compressed file ({exc})",
                            path=str(path)) from None


def decode_line(raw: bytes, path: str | os.PathLike, line: int | None, file_start: bool) -> str:
    """UTF-8 text of one record, a byte-order mark dropped where a file starts; else a
    `BadRecord` "not valid UTF-8" naming the first bad byte."""
    try:
        return raw.decode("utf-8-sig" if file_start else "utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord("not valid UTF-8",
                        f"not valid UTF-8 ({exc.object[exc.start:exc.start + 1]!r})",
                        path=str(path), line=line) from None


def unsafe_name(name: str) -> str | None:
    """Why a name read from the data (``/`` or ``\\`` separated) may not be joined to a
    folder: ``"is an absolute path"``, ``"contains '..'"``; None when it may."""
    posix = name.replace("\\", "/")
    if posix.startswith("/") or _DRIVE.match(posix):
        return "is an absolute path"
    if ".." in PurePosixPath(posix).parts:
        return "contains '..'"
    return None


def outside_reason(root: Path, name: str) -> str | None:
    """Why ``root / name`` may not be opened (`unsafe_name`, or ``"resolves outside <root>"``
    through a symbolic link), or None. ``root`` is already resolved."""
    why = unsafe_name(name)
    if why is None and not (root / name.replace("\\", "/")).resolve().is_relative_to(root):
        why = f"resolves outside {root}"
    return why


def too_much_data() -> str:
    """The message for data past its cap."""
    return (f"more than {MAX_DATA_BYTES:,} bytes of text (decompressed), the most attnkit "
            "reads from one data file; use a smaller sample")
