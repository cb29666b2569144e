"""Compiled once per machine: a model's graphs exported (``torch.export``) and compiled ahead of
time by AOTInductor into packages kept in the user's private cache, keyed by a digest of the
weights and checked against the torch build and CPU they were made for.

`Packages` builds them (a minute or two) and loads them (a fraction of a second). A package
that does not fit this machine, or a corrupt one, is built again; one that cannot be built
leaves the model eager, with one warning (docs/concepts.md, "Compiled decoding").
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnkit.errors import first_line
from attnkit.fileio import atomic_write_text, staged_folder

Log = Callable[[str], None]
# What a graph to build is: the module, example arguments, and their dynamic dimensions
# (``torch.export.export``'s ``dynamic_shapes``).
GraphSpec = tuple[nn.Module, tuple[Any, ...], Any]
Graphs = dict[str, Callable[..., Any]]
MACHINE_FILE = "machine.json"
# A folder the user chose for Inductor is kept; torch's default (a folder in /tmp that another
# user could have made first) is replaced. Read at import: torch sets the variable itself the
# first time it asks.
_INDUCTOR_DIR_GIVEN = "TORCHINDUCTOR_CACHE_DIR" in os.environ
_prepared = threading.Lock()


def cache_root() -> Path:
    """Where compiled packages live: ``$ATTNKIT_CACHE/compiled`` (default
    ``~/.cache/attnkit/compiled``)."""
    env = os.environ.get("ATTNKIT_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "attnkit"
    return base / "compiled"


def prepare_cache() -> Path:
    """Create the cache folder private to the user (``0700``) and put Inductor's working files
    there; OSError when it cannot be created.
    """
    root = cache_root()
    with _prepared:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        if not _INDUCTOR_DIR_GIVEN:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    return root


def machine_key() -> dict[str, str]:
    """What compiled code depends on besides the graph: the torch build and the CPU."""
    from attnkit.machine import cpu_model

    return {"torch": torch.__version__, "isa": torch.backends.cpu.get_cpu_capability(),
            "cpu": cpu_model()}


def weights_digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes of ``state`` (sorted by name), in hex; also
    the checksum of a checkpoint's tensors (`attnkit.training.checkpoint`)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{list(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class Packages:
    """The AOTInductor packages of one model: ``<cache>/<name>-<digest>/<graph>.pt2`` and
    ``machine.json`` (`machine_key`); ``digest`` is `weights_digest` of the model.
    """

    def __init__(self, name: str, digest: str):
        self.folder = cache_root() / f"{name}-{digest[:16]}"

    def exists(self) -> bool:
        """Whether packages were built for this model (not yet checked)."""
        return (self.folder / MACHINE_FILE).is_file()

    def load(self, names: Sequence[str], log: Log) -> Graphs | None:
        """The graphs ``names`` as callables; None when they are not built, or were built
        for another machine or are damaged (one log line; the folder goes)."""
        if not self.exists():
            return None
        try:
            made_for = json.loads((self.folder / MACHINE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            made_for = None
        if made_for != machine_key():
            why = ("built for " + ", ".join(f"{k} {v}" for k, v in made_for.items())
                   if isinstance(made_for, dict) else "without a readable machine.json")
            return self._drop(f"compiled decoding in {self.folder} {why}: building it again", log)
        try:
            from torch._inductor import aoti_load_package

            return {name: aoti_load_package(str(self.folder / f"{name}.pt2")) for name in names}
        # Whatever a damaged package raises as it loads, the answer is to build it again.
        except Exception as exc:
            return self._drop(f"compiled decoding in {self.folder} is damaged "
                              f"({type(exc).__name__}): building it again", log)

    def build(self, graphs: Mapping[str, GraphSpec], log: Log) -> Graphs | None:
        """Export and compile every graph into a new folder, moved into place once whole,
        then load them; None (and one warning) when they cannot be built. Processes that
        build the same packages at once (a server's workers) take turns: the first builds,
        the others load what it built."""
        try:
            with _locked(prepare_cache() / f".{self.folder.name}.lock"):
                return self.load(list(graphs), log) if self.exists() else self._build(graphs, log)
        except OSError as exc:
            log(f"attnkit: warning: decoding could not be compiled ({exc.strerror or exc}); "
                "it stays eager")
            return None

    def _build(self, graphs: Mapping[str, GraphSpec], log: Log) -> Graphs | None:
        try:
            from torch._inductor import aoti_compile_and_package

            prepare_cache()
            with staged_folder(self.folder) as staging:
                for name, (module, args, dynamic) in graphs.items():
                    with torch.no_grad():
                        program = torch.export.export(module, args, dynamic_shapes=dynamic)
                    aoti_compile_and_package(program, package_path=str(staging / f"{name}.pt2"))
                atomic_write_text(staging / MACHINE_FILE,
                                  json.dumps(machine_key(), sort_keys=True))
                shutil.rmtree(self.folder, ignore_errors=True)
                os.replace(staging, self.folder)
        # A build fails in many ways (no C++ compiler, an ISA the compiler does not know, an
        # operation it cannot lower, a full disk); each one leaves the model eager.
        except Exception as exc:
            log(f"attnkit: warning: decoding could not be compiled ({type(exc).__name__}: "
                f"{first_line(exc)}); it stays eager")
            return None
        return self.load(list(graphs), log)

    def _drop(self, message: str, log: Log) -> None:
        log(message)
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), held while the block runs."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
