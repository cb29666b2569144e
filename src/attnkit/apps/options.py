"""What the apps share about options: their declaration for the command line, the device,
splitting keyword overrides by owner, and sizes checked before a model is allocated.

An app declares its own command-line options as `Option` s (no argparse here: ``attnkit.cli``
builds the parser from them), each naming the command it belongs to and where its value goes:
a training setting, an option of ``evaluate`` / ``predict``, or of ``load``.

Example:
    ```python
    Option("--beam", int, "beam size (default 1 = greedy)", commands=("eval", "predict"))
    Option("--no-mask", help="attend to padding (2018)", dest="mask_padding", const=False)
    resolve_device("auto")              # "cuda" where CUDA is present, else "cpu"
    split_options({"epochs": 3, "hidden": 8}, {"train": TRAIN_FIELDS, "model": MODEL},
                  "translate setting")   # {"train": {"epochs": 3}, "model": {"hidden": 8}}
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from attnkit.errors import CheckpointError, UsageError

# The most parameters a run's model may have (about 8 GB in float32): a config.json edited to
# a size of 10^12 is refused before anything is allocated.
MAX_PARAMETERS = 2_000_000_000


@dataclass(frozen=True)
class Option:
    """One command-line option of an app.

    Args:
        flag: ``"--beam"``.
        type: ``int``, ``float``, ``str``; None for a switch (a flag without a value).
        help: the help line (say the default).
        commands: the commands that take it: ``"train"``, ``"eval"``, ``"predict"``.
        choices: the values allowed.
        dest: the setting or keyword it fills (default: the flag's name with ``_``).
        const: a switch's value when given (default True; e.g. False for ``--no-mask``).
        stage: where the value goes for eval/predict: ``"call"`` (a keyword of ``evaluate`` /
            ``predict``) or ``"load"`` (a keyword of ``load``, e.g. ``--engine``).
        default: the value when not given (None: not given, the app decides).
        metavar: the value's name in the help.
        aliases: other flags for the same option.
    """

    flag: str
    type: Callable[[str], Any] | None = None
    help: str = ""
    commands: tuple[str, ...] = ("train",)
    choices: tuple[Any, ...] | None = None
    dest: str | None = None
    const: Any = True
    stage: str = "call"
    default: Any = None
    metavar: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The setting or keyword the option fills."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


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


def explain_methods(value: str | Iterable[str] | None, known: Iterable[str]) -> list[str]:
    """``--explain`` (or ``--methods``) as a list of methods among ``known``: comma-separated
    names or ``"all"`` (every one); None gives none.

    Raises:
        UsageError: an unknown method, or Captum missing for a gradient one
            (`attnkit.models.attribution.check_method`).
    """
    from attnkit.models.attribution import check_method

    known = tuple(known)
    if value is None:
        return []
    names = value.split(",") if isinstance(value, str) else list(value)
    names = list(known) if names == ["all"] else [n.strip() for n in names if n.strip()]
    for name in names:
        if name not in known:
            raise UsageError(f"--explain must be among {', '.join(known)} (or all), got "
                             f"{name!r}")
        if name != "rollout":          # rollout is attention's own arithmetic
            check_method(name)
    return names


def split_options(given: Mapping[str, Any], owners: Mapping[str, Iterable[str]],
                  what: str) -> dict[str, dict[str, Any]]:
    """``given`` keyword options by owner (the first owner listing a name takes it); ``what``
    names them in the error (``"translate setting"``).

    Raises:
        UsageError: a name no owner knows (the message lists the known ones).
    """
    parts: dict[str, dict[str, Any]] = {owner: {} for owner in owners}
    unknown = []
    for name, value in given.items():
        owner = next((o for o, names in owners.items() if name in names), None)
        if owner is None:
            unknown.append(name)
        else:
            parts[owner][name] = value
    if unknown:
        known = sorted({n for names in owners.values() for n in names})
        raise UsageError(f"unknown {what}(s): {', '.join(sorted(unknown))} (known: "
                         f"{', '.join(known)})")
    return parts


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


@dataclass(frozen=True)
class Command:
    """A command of an app beyond ``train`` / ``eval`` / ``predict`` (``translate export``).

    Args:
        name: ``attnkit APP NAME``.
        help: one line.
        arguments: its `Option` s (a flag without dashes is positional).
        run: called with the parsed values by option name; returns the exit status.
        examples: command lines for its ``--help``.
    """

    name: str
    help: str
    arguments: tuple[Option, ...]
    run: Callable[[dict[str, Any]], int]
    examples: tuple[str, ...] = ()
