"""Settings as plain dataclasses, each default in one place: a field declares its default, its
bounds and its help (`setting`); the command-line options (`Option`, built into a parser by
``attnkit.cli``), their help texts and the one check of the values (`check_settings`) are
generated from the fields. Also: splitting keyword overrides by owner (`split_options`), and
what a ``--resume`` may change (`check_resume`). An example app: docs/guide/add-an-app.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from attnkit.errors import UsageError


@dataclass(frozen=True)
class Option:
    """One command-line option of an app: ``flag`` (``"--beam"``; without dashes, positional),
    ``type`` (None: a switch, giving ``const``), the ``commands`` that take it, the ``dest`` it
    fills, and its ``stage``: a keyword of the ``"call"`` (``evaluate``/``predict``), of
    ``"load"`` (``--engine``) or of how predictions are shown (``"show"``). The rest: argparse's.
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
    required: bool = False

    @property
    def name(self) -> str:
        """The setting or keyword the option fills."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


# The options every app's ``train`` takes (``attnkit.cli.apps``), whatever its settings.
COMMON = ("data", "epochs", "batch_size", "lr", "seed", "max_minutes", "patience", "device",
          "amp", "compile", "progress")


def setting(default: Any = None, help: str = "", *, shown: str | None = None,
            defaults: Mapping[str, Any] | None = None, low: int | None = None,
            valid: tuple[Callable[[Any], bool], str] | None = None,
            choices: tuple[Any, ...] | None = None, commands: tuple[str, ...] = ("train",),
            flag: str | None = None, metavar: str | None = None, const: Any = True) -> Any:
    """A dataclass field that is a setting (and, with ``help``, a command-line option): its
    ``help`` without the default (`options_of` adds it, or ``shown``), ``defaults`` by case when
    None stands for one (``{"rnn": 1, "transformer": 2}``), ``low`` (an integer's least value),
    ``valid`` (a number's test and what it wants); the rest as `Option`.
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


def options_of(settings: type) -> tuple[Option, ...]:
    """The `Option` of each setting of ``settings`` with a help (those in `COMMON` left out)."""
    out = []
    for f in dataclasses.fields(settings):
        if not f.metadata.get("help") or f.name in COMMON:
            continue
        meta, kind = f.metadata, _type(f)
        value_type = None if _switch(f) else (float if "float" in kind else
                                               int if "int" in kind else str)
        out.append(Option(flag_of(f), value_type, help_of(f), meta["commands"],
                          meta.get("choices"), f.name, meta["const"], metavar=meta.get(
                              "metavar", "N" if value_type is int else None)))
    return tuple(out)


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
    """UsageError (naming the flag) at the first field of ``settings`` out of its declared bounds;
    None passes where the type allows it.
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
    """``given`` options by owner (the first owner listing a name takes it); UsageError for a
    name no owner knows, listing the known ones (``what`` names them: ``"translate setting"``).
    """
    known = {n for names in owners.values() for n in names}
    unknown = sorted(set(given) - known)
    if unknown:
        raise UsageError(f"unknown {what}(s): {', '.join(unknown)} (known: "
                         f"{', '.join(sorted(known))})")
    parts: dict[str, dict[str, Any]] = {owner: {} for owner in owners}
    for name, value in given.items():
        parts[next(o for o, names in owners.items() if name in names)][name] = value
    return parts


def check_resume(stored: Mapping[str, Any], given: Mapping[str, Any], *,
                 applied: tuple[str, ...] = ("epochs", "max_minutes")) -> dict[str, Any]:
    """The options given with ``--resume`` that apply (those in ``applied``, not None); UsageError
    for any other whose value differs from the run's ``stored`` one, naming both and what to
    do instead (``check_resume({"seed": 0}, {"seed": 1})``).
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
