"""Settings as plain dataclasses, each default in one place: a field declares its default, its
bounds and its help; the command-line options (`Option`, declared as data: ``attnkit.cli``
builds the parser from them), their help texts (the default stated) and the one check of the
values are generated from the fields. Also: splitting keyword overrides by owner, and what a
``--resume`` may change.

An app declares its own command-line options as `Option` s, each naming the command it belongs
to and where its value goes: a training setting, an option of ``evaluate`` / ``predict``, or of
``load``.

Example:
    ```python
    @dataclass
    class ReverseSettings:
        length: int = setting(8, "the most digits per sequence", low=2)
        hidden: int = setting(32, "GRU units", low=1)

        def __post_init__(self) -> None:
            check_settings(self)             # UsageError: --length must be an integer >= 2

    options_of(ReverseSettings)          # (Option("--length", int, "... (default 8)"), ...)
    Option("--beam", int, "beam size (default 1 = greedy)", commands=("eval", "predict"))
    Option("--no-mask", help="attend to padding (2018)", dest="mask_padding", const=False)
    split_options({"epochs": 3, "hidden": 8}, {"train": TRAIN_FIELDS, "model": MODEL},
                  "translate setting")   # {"train": {"epochs": 3}, "model": {"hidden": 8}}
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from attnkit.errors import UsageError


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
        required: the command needs it (a missing one is one error line).
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
    required: bool = False

    @property
    def name(self) -> str:
        """The setting or keyword the option fills."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


# The options every app's ``train`` takes (``attnkit.cli.common``), whatever its settings.
COMMON = ("data", "epochs", "batch_size", "lr", "seed", "max_minutes", "patience", "device",
          "amp", "compile", "progress")


def setting(default: Any = None, help: str = "", *, shown: str | None = None,
            defaults: Mapping[str, Any] | None = None, low: int | None = None,
            valid: tuple[Callable[[Any], bool], str] | None = None,
            choices: tuple[Any, ...] | None = None, commands: tuple[str, ...] = ("train",),
            flag: str | None = None, metavar: str | None = None, const: Any = True) -> Any:
    """A dataclass field that is a setting (and, with ``help``, a command-line option).

    Args:
        default: the value when not given.
        help: the option's help, without the default (`options_of` adds it).
        shown: what the help says the default is, when ``default`` alone does not say it
            (None: "the preset's", "words").
        defaults: the default by case, when None stands for one (``{"rnn": 1,
            "transformer": 2}``): the help lists them, and the app reads them from here.
        low: an integer setting's least value.
        valid: a number setting's test and what it wants (``(lambda x: 0 <= x < 1, "a number
            in [0, 1)")``).
        choices: the values allowed.
        commands, flag, metavar, const: as `Option` (``flag`` defaults to
            the name with dashes).
    """
    meta = {"help": help, "shown": shown, "defaults": defaults, "low": low, "valid": valid,
            "choices": choices, "commands": commands, "flag": flag, "metavar": metavar,
            "const": const}
    return dataclasses.field(default=default,
                             metadata={k: v for k, v in meta.items() if v is not None})


def flag_of(field: dataclasses.Field) -> str:
    """The command-line flag of a setting (``--max-len``)."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def default_text(field: dataclasses.Field) -> str:
    """The default of a setting as its help states it (``"128"``, ``"1 rnn, 2 transformer"``)."""
    meta = field.metadata
    if "defaults" in meta:
        return cases_text(meta["defaults"])
    return meta["shown"] if "shown" in meta else _text(field.default)


def cases_text(defaults: Mapping[str, Any]) -> str:
    """Defaults by case as a help states them: ``"1 rnn, 2 transformer"``."""
    return ", ".join(f"{_text(v)} {case}" for case, v in defaults.items())


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _type(field: dataclasses.Field) -> str:
    """A field's annotation as written (``"int | None"``), whether or not it was evaluated."""
    kind = field.type
    return kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))


def _switch(field: dataclasses.Field) -> bool:
    return _type(field).split(" |")[0] == "bool"


def help_of(field: dataclasses.Field) -> str:
    """A setting's help with its default (a switch states it only with ``shown``)."""
    if _switch(field) and "shown" not in field.metadata:
        return field.metadata["help"]
    return f"{field.metadata['help']} (default {default_text(field)})"


def options_of(settings: type, names: Iterable[str] | None = None) -> tuple[Option, ...]:
    """The `Option` of every setting of the dataclass ``settings`` that has a help, but those
    every app's ``train`` takes (`COMMON`) (or of ``names``, in that order)."""
    fields = {f.name: f for f in dataclasses.fields(settings)
              if f.metadata.get("help") and f.name not in COMMON}
    out = []
    for f in (fields[n] for n in names) if names is not None else fields.values():
        meta, kind = f.metadata, _type(f)
        value_type = None if _switch(f) else (float if "float" in kind else
                                               int if "int" in kind else str)
        out.append(Option(flag_of(f), value_type, help_of(f), meta["commands"],
                          meta.get("choices"), f.name, meta["const"], metavar=meta.get(
                              "metavar", "N" if value_type is int else None)))
    return tuple(out)


def helps_of(settings: type, names: Iterable[str]) -> dict[str, str]:
    """The help of each of ``names`` by name (the app's ``train_help`` for the options every
    app shares: ``--epochs``, ``--lr``...)."""
    fields = {f.name: f for f in dataclasses.fields(settings)}
    return {name: help_of(fields[name]) for name in names}


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or a float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bad_value(field: dataclasses.Field | str, value: Any, want: str) -> UsageError:
    """``--flag must be WANT, got VALUE``."""
    flag = flag_of(field) if isinstance(field, dataclasses.Field) else field
    return UsageError(f"{flag} must be {want}, got {value!r}")


def check_settings(settings: Any) -> None:
    """Every field of ``settings`` within its declared bounds (`setting`); None passes where
    the field's type allows it.

    Raises:
        UsageError: the first value out of bounds, naming its flag and what it must be.
    """
    for f in dataclasses.fields(settings):
        value, meta = getattr(settings, f.name), f.metadata
        if value is None and "None" in _type(f):
            continue
        if "low" in meta and not (is_int(value) and value >= meta["low"]):
            raise bad_value(f, value, f"an integer >= {meta['low']}")
        if "valid" in meta and not (is_number(value) and meta["valid"][0](value)):
            raise bad_value(f, value, meta["valid"][1])
        if "choices" in meta and value not in meta["choices"]:
            raise bad_value(f, value, "one of " + ", ".join(map(str, meta["choices"])))


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
