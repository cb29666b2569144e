"""Files a user may have copied, edited or damaged: atomic writes and checked reads.

Writes go to a temporary file beside the target, then ``os.replace`` (a link in its place is
replaced, never written through). A run's own files (`read_regular_file`, `checked_file`,
`read_json`) must be regular, inside their run folder and under a size cap, or one
`CheckpointError` names the file; a user's input (`read_user_input`: file, pipe or stdin) is
read up to `MAX_TEXT_BYTES` in `MAX_TEXT_LINES` lines, or one `DataError`."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from attnkit.errors import CheckpointError, DataError

MAX_JSON_BYTES = 8 << 20      # config.json, pipeline.json, model.json, test_metrics.json
MAX_VOCAB_BYTES = 256 << 20   # a 1M-token vocabulary is about 20 MB
# A text a command reads whole from the user (sentences to align, gold links, predict's stdin):
# far beyond any real input, and far below what would bring the machine down.
MAX_TEXT_BYTES = 128 << 20
MAX_TEXT_LINES = 1_000_000


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it goes
    (for writers that want a file name: safetensors, sentencepiece, savefig)."""
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


@contextmanager
def staged_folder(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a new empty folder beside ``path`` (its parent made) for a writer to fill and move
    into place; what is left of it goes when the block ends, on an error too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path`` as a Path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path`` as a Path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def remove(path: Path) -> None:
    """Delete a file, a link (never what it points to) or a folder tree, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented UTF-8 JSON, atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_files(folder: str | os.PathLike, files: dict[str, Any]) -> None:
    """Write each of ``files`` into ``folder`` by name, atomically and in order: bytes as they
    are, a dict as JSON (`write_json`), anything else by its ``to_json(path)`` (a
    vocabulary)."""
    for name, content in files.items():
        path = Path(folder) / name
        if isinstance(content, bytes):
            atomic_write_bytes(path, content)
        elif isinstance(content, dict):
            write_json(path, content)
        else:
            content.to_json(path)


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
    with os.fdopen(_no_follow(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as f:
        f.write(text.encode("utf-8"))


def truncate_file(path: str | os.PathLike, size: int) -> None:
    """Cut ``path`` to ``size`` bytes (creating it empty when missing); a link is refused."""
    with os.fdopen(_no_follow(Path(path), os.O_WRONLY | os.O_CREAT), "wb") as f:
        f.truncate(size)


def _unreadable(exc: OSError, what: str) -> str:
    """The message for ``what`` that could not be opened."""
    if isinstance(exc, FileNotFoundError):
        return f"{what} is missing"
    if isinstance(exc, IsADirectoryError):
        return f"{what} is a folder, not a file"
    return f"cannot read {what} ({exc.strerror or exc})"


def read_regular_file(path: str | os.PathLike, what: str, *, limit: int | None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (None: any size).

    Raises:
        CheckpointError: missing, not a regular file (``/dev/zero``), too big, unreadable.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CheckpointError(f"{path}: {what} is not a regular file (a device, pipe "
                                      "or socket)")
            data = f.read(-1 if limit is None else limit + 1)
    except OSError as exc:
        raise CheckpointError(f"{path}: {_unreadable(exc, what)}") from None
    if limit is not None and len(data) > limit:
        raise CheckpointError(f"{path}: {what} is larger than {limit:,} bytes; it is not one "
                              "attnkit wrote")
    return data


def read_user_input(source: str | os.PathLike | BinaryIO, what: str) -> bytes:
    """The bytes of a file, pipe or stream a user gives a command (``--source <(zcat en.gz)``,
    stdin), never past `MAX_TEXT_BYTES` in `MAX_TEXT_LINES` lines; else one DataError."""
    limit = MAX_TEXT_BYTES
    shown = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    try:
        if shown is None:
            data = source.read(limit + 1)   # type: ignore[union-attr]
        else:
            with open(shown, "rb") as f:
                info = os.fstat(f.fileno())   # a regular file says its size: refused unread
                if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                    raise DataError(_too_big(what, limit), path=shown)
                data = f.read(limit + 1)
    except OSError as exc:
        raise DataError(_unreadable(exc, what), path=shown) from None
    if len(data) > limit:
        raise DataError(_too_big(what, limit), path=shown)
    if data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0) > MAX_TEXT_LINES:
        raise DataError(f"more than {MAX_TEXT_LINES:,} lines in {what}, the most attnkit reads "
                        "at once; split it", path=shown)
    return data


def read_user_text(path: str | os.PathLike, what: str) -> str:
    """The UTF-8 text of a file the user gives (`read_user_input`; a byte-order mark may open
    it); DataError if it is not UTF-8."""
    try:
        return read_user_input(path, what).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} is not UTF-8 text (byte {exc.start})", path=str(path)) from None


def read_lines(path: str | os.PathLike, what: str) -> list[str]:
    """The lines of a UTF-8 text the user gives (`read_user_text`; a final newline ends the
    last line, it does not start an empty one)."""
    text = read_user_text(path, f"the {what}")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in chunks (a data set may be larger than memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _too_big(what: str, limit: int) -> str:
    return f"more than {limit:,} bytes in {what}, the most attnkit reads at once; split it"


def check_inside(path: str | os.PathLike, what: str, root: str | os.PathLike) -> Path:
    """``path``, when it lies inside ``root`` once every link on the way is followed (``RUN/last``
    linked elsewhere makes ``RUN/last/model.safetensors`` another run's file); else CheckpointError.
    """
    path = Path(path)
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise CheckpointError(f"{path}: {what} is a link to {os.path.realpath(path)}, outside "
                              f"the run folder {root}; attnkit reads only the run's own files")
    return path


def checked_file(path: str | os.PathLike, what: str, *, root: str | os.PathLike | None = None,
                 limit: int | None = MAX_JSON_BYTES) -> Path:
    """``path`` when present, a regular file, inside ``root`` (if given) and at most ``limit``
    bytes; else CheckpointError."""
    path = Path(path)
    if root is not None:
        check_inside(path, what, root)
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
    except OSError as exc:
        raise CheckpointError(f"{path}: {_unreadable(exc, what)}") from None
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
    data = read_regular_file(checked_file(path, what, root=root, limit=limit), what, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None


def read_json(path: str | os.PathLike, what: str = "file", *,
              root: str | os.PathLike | None = None, limit: int | None = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path`` (``what`` names it in messages; ``root``, ``limit`` as
    `checked_file`); every way it can be unreadable is one CheckpointError naming the path."""
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
