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
    """True when ``folder`` holds a run (finished, interrupted, or without a checkpoint)."""
    return any(os.path.lexists(Path(folder) / name) for name in RUN_MARKERS)


def weights_file(run: str | os.PathLike, weights: str = "best") -> Path:
    """A run's ``best.safetensors`` (``weights="best"``) or ``last/model.safetensors``
    (``"last"``); UsageError for another name, CheckpointError when there is none yet."""
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
    """An exclusive ``flock`` on ``RUN/.lock`` while a process trains into the run (the
    kernel releases it when the process dies); the file holds the owner's PID, which a second
    process names in its error."""

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
        """Fail now if another process holds the lock, creating and writing nothing."""
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
    """``flock`` ``fd``; held by another process: close ``fd``, CheckpointError naming it."""
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
    """Validate ``out`` for a fresh training, writing nothing; CheckpointError when it is a
    file, locked, or holds a run and not ``overwrite`` (the message says what to do)."""
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
    """Validate ``run`` for ``--resume``, writing nothing; CheckpointError for no run, no
    ``last/`` checkpoint, checkpoint files not the run's own (`check_checkpoint_files`), a
    lock."""
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
    """CheckpointError naming the first offender unless ``last/`` and ``last.prev/`` are
    real folders (a resume moves and deletes them) and ``best.safetensors`` and their files
    stay inside the run (`attnkit.fileio.check_inside`); missing ones pass."""
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
    """Empty ``out`` (for ``--overwrite``) if it holds a run, so that a mistyped ``--out``
    never deletes what is not a run's; links are removed, never followed."""
    out = Path(out)
    if not is_run(out):
        return
    for entry in out.iterdir():
        if entry.name != LOCK_FILE:
            remove(entry)


@contextmanager
def claim_run(out: str | os.PathLike, *, resume: bool = False,
              overwrite: bool = False) -> Iterator[Path]:
    """Validate ``out`` again (`check_resumable` or `check_new_run`: it may have changed since
    the caller's check), then create and lock it (`RunLock`) for the ``with`` block, emptied
    first with ``overwrite``; CheckpointError also for a folder that cannot be written."""
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
    """CheckpointError naming the first size (of an edited ``config.json``, say) that is not a
    whole number from 1 (0 for the names in ``zero_ok``) to ``upper``; None passes."""
    for name, value in sizes.items():
        if value is None:
            continue
        lower = 0 if name in zero_ok else 1
        if isinstance(value, bool) or not isinstance(value, int) or not lower <= value <= upper:
            raise CheckpointError(f"{where}: {name} must be a whole number from {lower} to "
                                  f"{upper:,}, got {value!r}")


def build_bounded(factory: Callable[[], torch.nn.Module], where: str,
                  limit: int = MAX_PARAMETERS) -> torch.nn.Module:
    """``factory()``, once a build on the meta device (no memory) counted at most ``limit``
    parameters; else CheckpointError (``where`` names the config)."""
    with torch.device("meta"):
        count = sum(p.numel() for p in factory().parameters())
    if count > limit:
        raise CheckpointError(f"{where}: the model it describes has {count:,} parameters, "
                              f"more than {limit:,}; it is not one attnkit trained")
    return factory()


def load_model(factory: Callable[[], torch.nn.Module], run: Path, weights: str,
               device: str | None, where: str) -> tuple[torch.nn.Module, str]:
    """``(model, device)``: the model ``factory`` builds (`build_bounded`) with the run's
    ``weights`` (`weights_file`) loaded, in eval mode on ``device`` (`checked_device`)."""
    path = weights_file(run, weights)
    model = build_bounded(factory, where)
    load_weights(model, path)
    device = checked_device(device)
    return model.to(device).eval(), device


def read_evaluations(run: str | os.PathLike) -> list[dict[str, Any]]:
    """The ``{"kind": "eval", ...}`` lines of ``RUN/metrics.jsonl`` in order, each with
    ``"epoch"`` (from 0), ``"step"`` and the metrics as ``"val_<name>"``; CheckpointError for
    an unreadable file or a line that is not a JSON object (named with its number)."""
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
