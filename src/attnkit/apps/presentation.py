"""How the command line presents an app: its options, examples and help lines, its extra
commands (`Command`), and how its metrics and finished runs are printed.
`attnkit.apps.base.App` inherits it; ``attnkit.cli`` reads it to build ``attnkit APP ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from attnkit.apps.results import Run
from attnkit.settings import Option


@dataclass(frozen=True)
class Command:
    """A command of an app beyond ``train`` / ``eval`` / ``predict`` (``translate export``):
    its `Option` s (no dashes: positional), ``run`` called with the parsed values by name
    (returns the exit status), ``--help`` examples, ``runtime``: it runs a model (the CLI adds
    ``--threads`` and ``--device``)."""

    name: str
    help: str
    arguments: tuple[Option, ...]
    run: Callable[[dict[str, Any]], int]
    examples: tuple[str, ...] = ()
    runtime: bool = False


class Presentation:
    """What the ``attnkit APP`` commands show of an app: ``help`` (for ``attnkit --help``),
    ``description``, ``examples``, its `attnkit.settings.Option` s and extra `Command` s, the
    ``headline`` test metrics of a training's last line, helps where its defaults differ
    (``train_help``, ``eval_help``, ``eval_data_help``), ``default_threads`` by command,
    ``plot_aliases`` for ``--plot``, and ``text_attention``: what a plain-text ``predict`` asks
    for (None: the app's default; False when its line shows no attention).
    """

    help: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[tuple] = ()
    examples: ClassVar[tuple[str, ...]] = ()
    commands: ClassVar[tuple] = ()
    headline: ClassVar[tuple[str, ...]] = ()
    train_help: ClassVar[dict[str, str]] = {}
    eval_help: ClassVar[str] = "its metrics on held-out data"
    eval_data_help: ClassVar[str] = "data to evaluate on (default: the run's own test split)"
    default_threads: ClassVar[dict[str, int]] = {}
    plot_aliases: ClassVar[tuple[str, ...]] = ()
    text_attention: ClassVar[bool | None] = None

    def json_metrics(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The metrics ``eval --json`` prints (all of them unless the app says otherwise)."""
        return metrics

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        """The metrics as the ``eval`` command prints them."""
        return "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in metrics.items() if isinstance(v, (int, float, str)))

    def training_report(self, run: Run) -> str | None:
        """A table printed after ``train`` (e.g. a learning curve), or None."""
