"""Files a user names for an output (``--html``, ``--report``, ``--plot``, ``--out``): checked
once, here, then written atomically. The extension says what a file is; nothing a user names
lands inside a run folder (``run=`` marks a run's own writes); an existing file is replaced
only when it is that kind of output; an unwritable folder is one error line.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import atomic_write_bytes, read_json

_MAGIC = {".html": (b"<!doctype html", b"<html"), ".htm": (b"<!doctype html", b"<html"),
          ".png": (b"\x89png",), ".pdf": (b"%pdf",), ".svg": (b"<?xml", b"<svg")}
_PHARAOH = re.compile(rb"^\s*(\d+[-p]\d+(\s+\d+[-p]\d+)*)?\s*$")


def _magic(head: bytes, suffix: str) -> bool:
    return head.lstrip().lower().startswith(_MAGIC[suffix])


@dataclass(frozen=True)
class OutputKind:
    """What an output file is: a name for messages, the extensions it may have, and how the
    start of an existing file shows that it already is one (``sniff(head, suffix)``; by
    default its format's magic bytes)."""

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes, str], bool] = _magic

    @property
    def a(self) -> str:
        """The name with its article (``"a page"``, ``"an alignment file"``)."""
        return ("an " if self.name[0] in "aeiou" else "a ") + self.name


PAGE = OutputKind("page", (".html", ".htm"))
REPORT = OutputKind("report", PAGE.suffixes)
FIGURE = OutputKind("figure", (".png", ".pdf", ".svg"))
FIGURE_OR_PAGE = OutputKind("figure or page", FIGURE.suffixes + PAGE.suffixes)
EXPORT = OutputKind("export folder", (), lambda head, suffix: False)
ALIGNMENTS = OutputKind("alignment file", (".txt", ".wa", ".align", ".pharaoh"),
                        lambda head, suffix: bool(_PHARAOH.match(head.split(b"\n")[0])))


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(256)
    except OSError:
        return b""


def run_holding(path: str | os.PathLike) -> Path | None:
    """The run folder (or exported model) that ``path`` would land in: the folder it names
    or any folder above it, links followed; None when there is none."""
    folder = Path(os.path.realpath(Path(path).parent))
    return next((f for f in (folder, *folder.parents) if _holds_run(f)), None)


def _holds_run(folder: Path) -> bool:
    # A folder with any config.json is not a run: its config must name an app.
    if (folder / "best.safetensors").is_file() or (folder / "last" / "state.json").is_file():
        return True
    for name in ("config.json", "attnkit.json"):
        if (folder / name).is_file():
            try:
                config = read_json(folder / name, "a run's config", limit=1 << 20)
            except CheckpointError:
                continue
            if isinstance(config, dict) and "app" in config:
                return True
    return False


def output_file(path: str | os.PathLike, kind: OutputKind, *,
                run: str | os.PathLike | None = None) -> Path:
    """Check a file named for an output of ``kind``; nothing is written. ``run``: the run folder
    when a run's own command writes there, None for a user's file. UsageError: a wrong
    extension, a folder in its place, inside a run folder, an existing file of another kind.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in kind.suffixes:
        raise UsageError(f"{path}: {kind.a} is written to a {' / '.join(kind.suffixes)} "
                         f"file, not {suffix or 'a file without an extension'}")
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; name a file for the {kind.name}")
    if run is None:
        check_outside_runs(path, kind.name)
    if (path.exists() or path.is_symlink()) and not (
            path.is_file() and kind.sniff(_head(path), suffix)):
        raise UsageError(f"{path}: already exists and is not {kind.a}; remove it or name "
                         "a new file")
    return path


def check_outside_runs(path: str | os.PathLike, what: str) -> None:
    """UsageError when ``path`` would land inside a run folder."""
    run = run_holding(path)
    if run is not None:
        raise UsageError(f"{path}: inside the run folder {run}, which holds only what its own "
                         f"commands write; write the {what} outside it")


def write_output(path: str | os.PathLike, kind: OutputKind, content: str | bytes, *,
                 run: str | os.PathLike | None = None) -> Path:
    """Check ``path`` (`output_file`) and write ``content`` to it atomically; UsageError."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return writing(output_file(path, kind, run=run), kind, lambda p: atomic_write_bytes(p, data))


def writing(path: Path, kind: OutputKind, write: Callable[[Path], object]) -> Path:
    """``write(path)`` with an OSError (no such folder, no permission, read-only, full disk)
    turned into one UsageError naming the file."""
    try:
        write(path)
    except OSError as exc:
        reason = {errno.EROFS: "read-only file system", errno.ENOSPC: "the disk is full",
                  errno.EACCES: "permission denied", errno.EEXIST: "a file stands where its "
                  "folder should be", errno.ENOTDIR: "a file stands where its folder should be"
                  }.get(exc.errno or 0, exc.strerror or str(exc))
        raise UsageError(f"{path}: cannot write the {kind.name} ({reason})") from None
    return path


def numbered_paths(path: str | os.PathLike, count: int) -> list[Path]:
    """``count`` output files for one ``--plot FILE``: FILE itself for one, else
    ``FILE-1.png``, ``FILE-2.png``... (the stem numbered, the extension kept)."""
    path = Path(path)
    if count == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{i}{path.suffix}") for i in range(1, count + 1)]
