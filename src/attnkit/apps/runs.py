"""The run folder every app trains into and loads from: one format, one set of rules.

A run folder holds:

```text
config.json        {"app": NAME, "format": 2, ...the app's settings..., "train": TrainConfig}
metrics.jsonl      one JSON object per log line / evaluation (the trainer's)
train.log          one readable line per evaluation (the trainer's)
best.safetensors   the weights of the best validation metric
last/              the resumable checkpoint (model, optimizer, RNG states, position)
test_metrics.json  the scores of the best weights on the run's test split
...                the app's pipeline files (vocabularies, tokenizer, subword model)
.lock              held while a process trains into the folder (its PID inside)
```

The rules, the same for every app:

* A folder that holds a run is never trained into again unless the caller says ``overwrite``
  (which empties it first) or ``resume``.
* Only one process trains into a folder at a time (`RunLock`); a second one fails at once
  naming the holder's PID.
* A resume takes the stored settings: an option given with it is applied when it is a budget
  (epochs, minutes), and refused with a message when it would change the run (seed, data,
  model shape); see `check_resume`. Nothing is written before a resume is validated.
* ``config.json`` carries the app and a format version; a run of another app, or of an unknown
  (newer) format, is a clear `CheckpointError`. Runs written before the format field existed
  are format 1 and load through each app's migration.
* Files are read through `attnkit.apps.run_files` (size caps, no links out of the run).

Example:
    ```python
    with start_run("runs/fr", app="translate", resume=False, overwrite=False) as run:
        ...                                     # write pipeline files, train
    config = read_config("runs/fr", app="translate")
    ```
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnkit.apps.run_files import read_json, read_json_object
from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import atomic_write_text

__all__ = ["CONFIG_FILE", "FORMAT", "RunLock", "check_new_run", "check_resumable",
           "check_resume", "clear_run", "is_run", "read_config", "read_json", "start_run",
           "write_json"]

FORMAT = 2                 # the format this code writes
KNOWN_FORMATS = (1, 2)     # 1: runs written before config.json had "format"
CONFIG_FILE = "config.json"
LOCK_FILE = ".lock"
# What marks a folder as holding a run (an interrupted one included).
RUN_MARKERS = (CONFIG_FILE, "best.safetensors", "last")


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented UTF-8 JSON, atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def is_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds a run (finished, interrupted, or stopped before any
    checkpoint)."""
    folder = Path(folder)
    return any(os.path.lexists(folder / name) for name in RUN_MARKERS)


def read_config(run: str | os.PathLike, app: str) -> dict[str, Any]:
    """``RUN/config.json`` of a run of ``app``, with ``"format"`` filled in (1 when absent).

    Raises:
        CheckpointError: not a run folder, a run of another app, an unknown format version, or
            an unreadable config.json.
    """
    run = Path(run)
    if not run.is_dir():
        raise CheckpointError(f"{run}: no such run folder")
    path = run / CONFIG_FILE
    if not os.path.lexists(path):
        raise CheckpointError(f"{run}: not a run folder (config.json is missing)")
    config = read_json_object(path, "the run's config", root=run)
    found = config.get("app")
    if found != app:
        if isinstance(found, str) and found.isidentifier():
            raise CheckpointError(f"{run} is a {found} run, not a {app} run; use "
                                  f"'attnkit {found} ...' with it")
        raise CheckpointError(f"{path}: not written by attnkit {app} (app is {found!r})")
    version = config.get("format", 1)
    if version not in KNOWN_FORMATS:
        raise CheckpointError(f"{path}: run format {version!r} is not one this attnkit reads "
                              f"(it reads {', '.join(map(str, KNOWN_FORMATS))}); it was "
                              "written by another version of attnkit")
    return {**config, "format": version}


class RunLock:
    """An exclusive lock on a run folder while a process trains into it.

    ``RUN/.lock`` is locked with ``flock`` (released by the kernel when the process dies, so a
    killed run never leaves a stale lock) and holds the owner's PID, which a second process
    names in its error.

    Example:
        ```python
        with RunLock("runs/fr"):
            trainer.fit()
        ```
    """

    def __init__(self, run: str | os.PathLike):
        self.path = Path(run) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise CheckpointError(_cannot_write(self.path.parent, exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise CheckpointError(f"{self.path.parent} is being trained by another process "
                                  f"(PID {holder}); wait for it or use another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    @staticmethod
    def check(run: str | os.PathLike) -> None:
        """Fail now if another process holds the lock, without creating or writing anything
        (so a run that would be refused is refused before it reads its data)."""
        path = Path(run) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return   # no lock file (or none we can open): nothing holds it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise CheckpointError(f"{path.parent} is being trained by another process "
                                  f"(PID {holder}); wait for it or use another --out") from None
        finally:
            os.close(fd)

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _cannot_write(folder: Path, exc: OSError) -> str:
    reason = {errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
              errno.ENOSPC: "the disk is full", errno.ELOOP: "a link stands in the way"}
    return (f"{folder}: cannot write the run folder "
            f"({reason.get(exc.errno or 0, exc.strerror or str(exc))})")


def check_new_run(out: str | os.PathLike, *, overwrite: bool) -> Path:
    """Validate ``out`` for a fresh training, without writing anything.

    Raises:
        CheckpointError: ``out`` holds a run and ``overwrite`` is False (the message says how
            to resume it or replace it), or ``out`` is a file.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CheckpointError(f"{out}: exists and is not a folder")
    if is_run(out) and not overwrite:
        if (out / "last").is_dir():
            hint = f"continue it with --resume {out}, or replace it with --overwrite"
        else:
            hint = ("it was stopped before its first checkpoint, so it cannot be resumed; "
                    "start it again with --overwrite")
        raise CheckpointError(f"{out} already holds a run; {hint}")
    RunLock.check(out)
    return out


def check_resumable(run: str | os.PathLike, app: str) -> dict[str, Any]:
    """The stored config of a run that ``--resume`` may continue, without writing anything.

    Raises:
        CheckpointError: no run there, a run of another app, or a run with no ``last/``
            checkpoint (stopped before its first one: the message says to use --overwrite).
    """
    run = Path(run)
    if not is_run(run):
        raise CheckpointError(f"{run}: nothing to resume (no run folder there); train it "
                              "without --resume")
    if not (run / "last").is_dir():
        raise CheckpointError(f"{run}: nothing to resume (the run was stopped before its first "
                              "checkpoint); start it again with --overwrite")
    RunLock.check(run)
    return read_config(run, app)


def clear_run(out: str | os.PathLike) -> None:
    """Remove everything in the run folder ``out`` (for ``--overwrite``); the folder stays.

    Only a folder that holds a run is emptied, so a mistyped ``--out`` never deletes files
    that are not a run's. Links are removed, never followed.
    """
    out = Path(out)
    if not is_run(out):
        return
    for entry in out.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@contextmanager
def start_run(out: str | os.PathLike, *, app: str, resume: bool = False,
              overwrite: bool = False) -> Iterator[Path]:
    """Validate, lock and (for ``overwrite``) empty a run folder for training into it.

    Validation comes first and writes nothing: a fresh run into a folder holding a run is
    refused without ``overwrite``; a resume needs a run of ``app`` with a ``last/`` checkpoint.
    Then the folder is created and locked for the duration of the ``with`` block.

    Raises:
        UsageError: both ``resume`` and ``overwrite``.
        CheckpointError: as `check_new_run`, `check_resumable`, `RunLock`; a folder that
            cannot be written (read-only, full, no permission).
    """
    out = Path(out)
    if resume and overwrite:
        raise UsageError("--resume and --overwrite contradict each other; give one")
    if resume:
        check_resumable(out, app)
    else:
        check_new_run(out, overwrite=overwrite)
    with RunLock(out):
        if overwrite:
            try:
                clear_run(out)
            except OSError as exc:
                raise CheckpointError(_cannot_write(out, exc)) from None
        yield out


def check_resume(stored: Mapping[str, Any], given: Mapping[str, Any], *,
                 applied: tuple[str, ...] = ("epochs", "max_minutes")) -> dict[str, Any]:
    """Which options given with ``--resume`` apply; refuse those that would change the run.

    Args:
        stored: the run's settings by option name (e.g. ``{"seed": 0, "data": "synthetic",
            "epochs": 8, ...}``).
        given: the options the user gave with the resume (None = not given).
        applied: options a resume may change (budgets).

    Returns:
        The given options in ``applied`` (to override the stored ones).

    Raises:
        UsageError: an option outside ``applied`` whose value differs from the stored one; the
            message names the option, both values, and what to do instead.

    Example:
        ```python
        check_resume({"seed": 0, "epochs": 8}, {"seed": None, "epochs": 12})  # {"epochs": 12}
        check_resume({"seed": 0}, {"seed": 1})          # UsageError: --seed 1 differs ...
        ```
    """
    changes = {}
    for name, value in given.items():
        if value is None:
            continue
        if name in applied:
            changes[name] = value
        elif name in stored and stored[name] != value:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} {value} differs from the resumed run's {stored[name]}; a "
                             f"resume keeps the run's settings (drop {flag}, or train a new run "
                             "with --overwrite or another --out)")
    return changes
