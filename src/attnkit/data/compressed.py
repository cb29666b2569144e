"""Opening a data file that may be gzip-compressed, told by its first bytes rather than its name.

Example:
    ```python
    with open_maybe_gzip("train.tsv.gz") as f:   # gzip or plain, the same binary stream
        first = f.readline()
    ```
"""

from __future__ import annotations

import gzip
import os
from typing import BinaryIO

from attnkit.errors import DataError

GZIP_MAGIC = b"\x1f\x8b"


def open_maybe_gzip(path: str | os.PathLike) -> BinaryIO:
    """A binary stream of ``path``'s content, decompressed if it starts like gzip.

    Raises:
        DataError: the file is missing or cannot be opened (a folder, no permission); the
            message names it. A corrupt gzip stream surfaces later, while reading
            (``gzip.BadGzipFile``, ``EOFError``, ``zlib.error``).
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")
    except FileNotFoundError as exc:
        raise DataError("file not found", path=str(path)) from exc
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
