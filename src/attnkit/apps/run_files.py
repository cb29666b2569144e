"""Reading a run folder's files: the one place that checks what it opens.

A run folder is data a user may have copied, edited or damaged, so nothing in it is trusted
before it is read:

* a file must be a regular file: a FIFO or a device (``config.json`` linked to ``/dev/zero``)
  would hang or fill memory;
* a symbolic link may point only inside the run folder: a run whose ``train.log`` points at
  another file must not make attnkit read (or, on resume, write) that file;
* a JSON file is read only up to a size cap (`MAX_JSON_BYTES`; a vocabulary may be
  larger, `MAX_VOCAB_BYTES`), so a huge or endless file is one error, not a
  ``MemoryError``.

Every failure is one `CheckpointError` naming the file.

Example:
    ```python
    path = run_file("runs/fr", "vocab_src.json", "the source vocabulary",
                    limit=MAX_VOCAB_BYTES)
    config = read_json("runs/fr/config.json", "the run's config", root="runs/fr")
    ```
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from attnkit.errors import CheckpointError
from attnkit.fileio import read_limited

MAX_JSON_BYTES = 8 << 20      # config.json, pipeline.json, model.json, test_metrics.json
MAX_VOCAB_BYTES = 256 << 20   # a 1M-token vocabulary is about 20 MB


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def run_file(run: str | os.PathLike, name: str, what: str, *,
             limit: int | None = MAX_JSON_BYTES) -> Path:
    """``RUN/name`` checked for reading: present, a regular file, inside the run, not too big.

    Args:
        run: the run folder.
        name: the file's name inside it (``"vocab.json"``, ``"last/model.safetensors"``).
        what: what the file is, for messages (``"the run's vocabulary"``).
        limit: the largest size accepted in bytes (None: any).

    Returns:
        The path, to hand to the file's own reader.

    Raises:
        CheckpointError: missing, a folder, a device or FIFO, a link out of the run, too big.
    """
    return checked_file(Path(run) / name, what, root=run, limit=limit)


def checked_file(path: str | os.PathLike, what: str, *, root: str | os.PathLike | None = None,
                 limit: int | None = MAX_JSON_BYTES) -> Path:
    """`run_file` for any path; ``root`` (when given) is the folder links must stay in."""
    path = Path(path)
    if path.is_symlink() and root is not None and not _inside(path, Path(root)):
        raise CheckpointError(f"{path}: {what} is a link to {os.path.realpath(path)}, outside "
                              f"the run folder {root}; attnkit reads only the run's own files")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: {what} is missing") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise CheckpointError(f"{path}: {what} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"{path}: {what} is not a regular file (a device, pipe or "
                              "socket)")
    if limit is not None and info.st_size > limit:
        raise CheckpointError(f"{path}: {what} is {info.st_size:,} bytes, more than the "
                              f"{limit:,} such a file can be; it is not one attnkit wrote")
    return path


def read_text(path: str | os.PathLike, what: str = "file", *,
              root: str | os.PathLike | None = None, limit: int | None = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of a checked file (`checked_file`); a BOM is accepted.

    Raises:
        CheckpointError: as `checked_file`, or not UTF-8.
    """
    data = read_limited(checked_file(path, what, root=root, limit=limit), what, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None


def read_json(path: str | os.PathLike, what: str = "file", *,
              root: str | os.PathLike | None = None, limit: int | None = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path``; every way it can be unreadable is one CheckpointError.

    Args:
        path: the file.
        what: what the file is, for the message (e.g. ``"the run's config"``).
        root: the run folder the file belongs to (a link out of it is refused).
        limit: the largest size accepted in bytes.

    Raises:
        CheckpointError: missing, not a regular file, too big, not UTF-8, or not valid JSON
            (the message names the path).
    """
    text = read_text(path, what, root=root, limit=limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: {what} is not valid JSON ({exc.msg}, line "
                              f"{exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise CheckpointError(f"{path}: {what} nests too deeply to be one attnkit wrote") \
            from None


def read_json_object(path: str | os.PathLike, what: str, *,
                     root: str | os.PathLike | None = None) -> dict[str, Any]:
    """`read_json` of a file that must hold a JSON object."""
    value = read_json(path, what, root=root)
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: {what} must be a JSON object")
    return value


def weights_file(run: str | os.PathLike, weights: str = "best") -> Path:
    """The weights file of a run: ``best.safetensors`` (the best validation score) or
    ``last/model.safetensors`` (the latest checkpoint).

    Raises:
        UsageError: ``weights`` is neither ``"best"`` nor ``"last"``.
        CheckpointError: the run has no such weights yet (the message says what to do).
    """
    from attnkit.errors import UsageError

    run = Path(run)
    if weights not in ("best", "last"):
        raise UsageError(f"weights must be 'best' or 'last', got {weights!r}")
    name = "best.safetensors" if weights == "best" else "last/model.safetensors"
    if not os.path.lexists(run / name):
        if weights == "best":
            raise CheckpointError(f"{run}: no best weights yet (best.safetensors is missing: "
                                  "the run stopped before its first evaluation); continue it "
                                  f"with --resume {run}")
        raise CheckpointError(f"{run}: no checkpoint yet (last/model.safetensors is missing)")
    return run_file(run, name, f"the run's {weights} weights", limit=None)
