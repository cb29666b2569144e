"""What the apps share beside their settings (`attnkit.settings`: the `Option` s an app
declares, generated from its settings dataclass or written out): their extra commands
(`Command`), the device, and sizes checked before a model is allocated and loaded.

Example:
    ```python
    Command("export", "export a run", (Option("run", str, "the run folder"),), run_export)
    resolve_device("auto")              # "cuda" where CUDA is present, else "cpu"
    model, device = load_model(lambda: build_model(config), run, "best", "cpu", "config.json")
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnkit.errors import CheckpointError, UsageError
from attnkit.settings import Option, is_int
from attnkit.training import TrainConfig
from attnkit.training.run_folder import weights_file

# The most parameters a run's model may have (about 8 GB in float32): a config.json edited to
# a size of 10^12 is refused before anything is allocated.
MAX_PARAMETERS = 2_000_000_000


def resolve_device(name: str | None, *, flag: str = "--device") -> str:
    """A device name torch accepts and this machine has (None: CPU; ``"auto"``: CUDA when
    present, else CPU).

    Raises:
        UsageError: an unknown device, or CUDA asked for where there is none.
    """
    from attnkit.training.distributed import resolve_device as resolve

    try:
        torch.device(name or "cpu") if name != "auto" else None
    except RuntimeError:
        raise UsageError(f"{flag} {name}: unknown device; use cpu, cuda, cuda:N or "
                         "auto") from None
    try:
        return str(resolve(name or "cpu"))
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"{flag} {name}: {exc}") from None


def stored_threads(config: Mapping[str, Any]) -> int | None:
    """The CPU threads a run trained with, as its ``config.json`` records them (the trainer's
    ``runtime.machine.threads``); None when it does not (an older run, an edited file)."""
    runtime = config.get("runtime")
    machine = runtime.get("machine") if isinstance(runtime, Mapping) else None
    threads = machine.get("threads") if isinstance(machine, Mapping) else None
    return threads if is_int(threads) and threads >= 1 else None


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` while inside (None: left as they are); the count
    before comes back on exit.

    Raises:
        UsageError: fewer than 1.
    """
    if threads is None:
        yield
        return
    if not is_int(threads) or threads < 1:
        raise UsageError(f"--threads must be at least 1, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_config(values: Mapping[str, Any]) -> TrainConfig:
    """A `TrainConfig` of ``values`` on a device this machine has (`resolve_device`).

    Raises:
        UsageError: a value it refuses, naming the option (``--lr must be ...``).
    """
    try:
        cfg = TrainConfig(**values)
    except (TypeError, ValueError, RuntimeError) as exc:
        message = str(exc)
        for f in dataclasses.fields(TrainConfig):
            message = message.replace(f"TrainConfig.{f.name}", "--" + f.name.replace("_", "-"))
        raise UsageError(message) from None
    resolve_device(cfg.device)
    return cfg


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
    or ``"last"``, `attnkit.training.run_folder.weights_file`) loaded, in eval mode on ``device``
    (`resolve_device`); and the device.

    Raises:
        CheckpointError: no such weights, a model too large, weights that do not fit it.
        UsageError: a bad device.
    """
    from attnkit.training import load_weights

    path = weights_file(run, weights)
    model = build_bounded(factory, where)
    load_weights(model, path)
    device = resolve_device(device)
    return model.to(device).eval(), device


@dataclass(frozen=True)
class Command:
    """A command of an app beyond ``train`` / ``eval`` / ``predict`` (``translate export``).

    Args:
        name: ``attnkit APP NAME``.
        help: one line.
        arguments: its `Option` s (a flag without dashes is positional).
        run: called with the parsed values by option name; returns the exit status.
        examples: command lines for its ``--help``.
        runtime: it runs a model: the CLI adds ``--threads`` (applied before ``run``) and
            ``--device`` (in the values).
    """

    name: str
    help: str
    arguments: tuple[Option, ...]
    run: Callable[[dict[str, Any]], int]
    examples: tuple[str, ...] = ()
    runtime: bool = False
