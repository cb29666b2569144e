"""The run folder a training writes into: one set of rules, the same for every caller
(docs/concepts.md, "The run folder"). Start at `check_new_run` / `check_resumable` (before
any data is read), `claim_run` (create and lock it), `weights_file` and `load_model`.

Example:
    ```python
    check_new_run("runs/fr", overwrite=False)   # before reading any data
    with claim_run("runs/fr") as run:
        ...                                     # write pipeline files, train
    ```
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import MAX_VOCAB_BYTES, check_inside, checked_file, read_text, remove
from attnkit.settings import is_int
from attnkit.training.checkpoint import load_weights
from attnkit.training.distributed import checked_device

LOCK_FILE = ".lock"
METRICS_LOG = "metrics.jsonl"
# The files of the resumable checkpoint ``last/`` (`attnkit.training.checkpoint.save_checkpoint`).
CHECKPOINT_FILES = ("model.safetensors", "optimizer.safetensors", "state.json")
# What marks a folder as holding a run (an interrupted one included).
RUN_MARKERS = ("config.json", "best.safetensors", "last")
# The most parameters a run's model may have (about 8 GB in float32): a config.json edited to
# a size of 10^12 is refused before anything is allocated.
MAX_PARAMETERS = 2_000_000_000
_NOT_RESUMABLE = ("it was stopped before its first checkpoint, so it cannot be resumed; start "
                  "it again with --overwrite")


def is_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds a run (finished, interrupted, or stopped before any
    checkpoint)."""
    return any(os.path.lexists(Path(folder) / name) for name in RUN_MARKERS)


def weights_file(run: str | os.PathLike, weights: str = "best") -> Path:
    """The weights file of a run: ``best.safetensors`` (the best validation score) or
    ``last/model.safetensors`` (the latest checkpoint).

    Raises:
        UsageError: ``weights`` is neither ``"best"`` nor ``"last"``.
        CheckpointError: the run has no such weights yet (the message says what to do).
    """
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
    return checked_file(run / name, f"the run's {weights} weights", root=run, limit=None)


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

    def __enter__(self) -> RunLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise CheckpointError(_cannot_write(self.path.parent, exc)) from None
        _lock(fd, self.path.parent)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    @staticmethod
    def check(run: str | os.PathLike) -> None:
        """Fail now if another process holds the lock, without creating or writing anything
        (so a run that would be refused is refused before it reads its data)."""
        try:
            fd = os.open(Path(run) / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return   # no lock file (or none we can open): nothing holds it
        _lock(fd, Path(run))
        os.close(fd)

    def __exit__(self, *exc: object) -> None:
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _lock(fd: int, folder: Path) -> None:
    """``flock`` the open lock file ``fd``; when another process holds it, close ``fd`` and
    raise one CheckpointError naming its PID."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise CheckpointError(f"{folder} is being trained by another process (PID {holder}); "
                              "wait for it or use another --out") from None


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
        hint = (f"continue it with --resume {out}, or replace it with --overwrite"
                if (out / "last").is_dir() else _NOT_RESUMABLE)
        raise CheckpointError(f"{out} already holds a run; {hint}")
    RunLock.check(out)
    return out


def check_resumable(run: str | os.PathLike) -> Path:
    """Validate ``run`` for ``--resume``, without writing anything.

    Raises:
        CheckpointError: no run there, or a run with no ``last/`` checkpoint (stopped before
            its first one: the message says to use --overwrite), checkpoint files that are not
            the run's own (`check_checkpoint_files`), or a locked one.
    """
    run = Path(run)
    if not is_run(run):
        raise CheckpointError(f"{run}: nothing to resume (no run folder there); train it "
                              "without --resume")
    check_checkpoint_files(run)
    if not (run / "last").is_dir():
        raise CheckpointError(f"{run}: nothing to resume (the run was stopped before its first "
                              "checkpoint); start it again with --overwrite")
    RunLock.check(run)
    return run


def check_checkpoint_files(run: str | os.PathLike) -> None:
    """Fail unless what a resume reads and replaces is the run's own, before anything is read
    or moved: ``last/`` and ``last.prev/`` are real folders (a resume moves and deletes them,
    and never does either through a link), and ``best.safetensors`` and the files in those
    folders do not lead out of the run (the rule for every file of a run,
    `attnkit.fileio.checked_file`). Missing ones pass.

    Raises:
        CheckpointError: the first offender, named, with what to do (replace the link by the
            folder or file itself; the run then resumes).
    """
    run = Path(run)
    folders = (run / "last", run / "last.prev")
    for folder in folders:
        if folder.is_symlink():
            raise CheckpointError(f"{folder} is a link to {os.path.realpath(folder)}; a resume "
                                  "replaces the checkpoint folder and never moves or deletes "
                                  "through a link: put the folder itself there")
    for path in [run / "best.safetensors", *(f / n for f in folders for n in CHECKPOINT_FILES)]:
        if os.path.lexists(path):
            check_inside(path, "a checkpoint file", run)


def next_step(run: str | os.PathLike) -> str:
    """What a user can do with a run a signal stopped, in the words `check_resumable` and
    `check_new_run` will use: resume it when it has a checkpoint, else start it again."""
    run = Path(run)
    if (run / "last").is_dir():
        return f"the run resumes with --resume {run}"
    return _NOT_RESUMABLE if is_run(run) else "no run was written yet; start it again"


def clear_run(out: str | os.PathLike) -> None:
    """Remove everything in the run folder ``out`` (for ``--overwrite``); the folder stays.

    Only a folder that holds a run is emptied, so a mistyped ``--out`` never deletes files
    that are not a run's. Links are removed, never followed.
    """
    out = Path(out)
    if not is_run(out):
        return
    for entry in out.iterdir():
        if entry.name != LOCK_FILE:
            remove(entry)


@contextmanager
def claim_run(out: str | os.PathLike, *, resume: bool = False,
              overwrite: bool = False) -> Iterator[Path]:
    """Validate ``out`` again (`check_resumable` or `check_new_run`: a caller checks before it
    reads its data, and the folder may have changed since), then create and lock it for the
    duration of the ``with`` block, emptied first with ``overwrite``.

    Raises:
        CheckpointError: as `check_new_run`, `check_resumable`, `RunLock`; a folder that
            cannot be written (read-only, full, no permission).
    """
    out = Path(out)
    if resume:
        check_resumable(out)
    else:
        check_new_run(out, overwrite=overwrite)
    with RunLock(out):
        if overwrite:
            try:
                clear_run(out)
            except OSError as exc:
                raise CheckpointError(_cannot_write(out, exc)) from None
        yield out


def stored_threads(config: Mapping[str, Any]) -> int | None:
    """The CPU threads a run trained with, as its ``config.json`` records them (the trainer's
    ``runtime.machine.threads``); None when it does not (an older run, an edited file)."""
    runtime = config.get("runtime")
    machine = runtime.get("machine") if isinstance(runtime, Mapping) else None
    threads = machine.get("threads") if isinstance(machine, Mapping) else None
    return threads if is_int(threads) and threads >= 1 else None


def checked_sizes(sizes: Mapping[str, Any], where: str, *, upper: int = 1 << 24,
                  zero_ok: tuple[str, ...] = ()) -> None:
    """Every size a positive whole number up to ``upper`` (0 allowed for the names in
    ``zero_ok``: "none"), checked before anything is built from them (a ``config.json`` may
    have been edited).

    Raises:
        CheckpointError: the first size that is not (named, with ``where``).
    """
    for name, value in sizes.items():
        if value is None:
            continue
        lower = 0 if name in zero_ok else 1
        if isinstance(value, bool) or not isinstance(value, int) or not lower <= value <= upper:
            raise CheckpointError(f"{where}: {name} must be a whole number from {lower} to "
                                  f"{upper:,}, got {value!r}")


def build_bounded(factory: Callable[[], torch.nn.Module], where: str,
                  limit: int = MAX_PARAMETERS) -> torch.nn.Module:
    """``factory()``, after building it once on the meta device (no memory) to count its
    parameters: a model larger than ``limit`` is refused instead of allocated.

    Raises:
        CheckpointError: more than ``limit`` parameters (``where`` names the config).
    """
    with torch.device("meta"):
        count = sum(p.numel() for p in factory().parameters())
    if count > limit:
        raise CheckpointError(f"{where}: the model it describes has {count:,} parameters, "
                              f"more than {limit:,}; it is not one attnkit trained")
    return factory()


def load_model(factory: Callable[[], torch.nn.Module], run: Path, weights: str,
               device: str | None, where: str) -> tuple[torch.nn.Module, str]:
    """The model ``factory`` builds (`build_bounded`) with the run's ``weights`` (``"best"``
    or ``"last"``, `weights_file`) loaded, in eval mode on ``device``
    (`attnkit.training.distributed.checked_device`); and the device.

    Raises:
        CheckpointError: no such weights, a model too large, weights that do not fit it.
        UsageError: a bad device.
    """
    path = weights_file(run, weights)
    model = build_bounded(factory, where)
    load_weights(model, path)
    device = checked_device(device)
    return model.to(device).eval(), device


def read_evaluations(run: str | os.PathLike) -> list[dict[str, Any]]:
    """The evaluation lines of the trainer's ``RUN/metrics.jsonl`` (a JSON object per line:
    ``{"kind": "train", ...}`` every ``log_every_steps``, ``{"kind": "eval", ...}`` per
    evaluation), in order: each a dict with ``"epoch"`` (counted from 0), ``"step"`` and
    ``evaluate_fn``'s metrics prefixed ``"val_"``.

    Raises:
        CheckpointError: no such file, not a regular file, over `MAX_VOCAB_BYTES`, or a line
            that is not a JSON object (named with its number).
    """
    path = Path(run) / METRICS_LOG
    text = read_text(path, "the run's metrics", root=run, limit=MAX_VOCAB_BYTES)
    evaluations = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{path} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise CheckpointError(f"{path} line {number}: not a JSON object")
        if record.get("kind") == "eval":
            evaluations.append(record)
    return evaluations
