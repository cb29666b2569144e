"""How the command line presents an app: its options, examples and help lines, its extra
commands (`Command`), and how its metrics and finished runs are printed.
`attnkit.apps.base.App` inherits it; ``attnkit.cli`` reads it to build ``attnkit APP ...``.

Example:
    ```python
    class ReverseApp(App):
        name = "reverse"
        help = "reverse a sequence of digits"
        headline = ("accuracy",)
        options = (Option("--length", int, "digits per sequence (default 8)"),)
        commands = (Command("export", "export a run", (Option("run", str, "the run"),),
                            run_export),)
    ```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from attnkit.apps.results import Run
from attnkit.settings import Option


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


class Presentation:
    """What the ``attnkit APP`` commands show of an app.

    Class attributes:
        help: one line for ``attnkit --help``.
        description: a paragraph for ``attnkit NAME --help``.
        options: `attnkit.settings.Option` s the CLI adds for this app.
        examples: command lines shown under ``attnkit NAME --help``.
        commands: `Command` s beyond train / eval / predict (e.g.
            ``translate export``).
        headline: the test metrics a finished training prints on its last line.
        train_help: the help of common train options, by name, where the app's defaults
            differ (``{"epochs": "default 8"}``).
        eval_help, eval_data_help: the help of ``eval`` and of its ``--data``.
        default_threads: CPU threads by command where torch's default (one per core) is not
            the fastest for the app's small models.
        plot_aliases: other flags the app accepts for ``predict --plot``.
        text_attention: the ``attention`` a plain ``predict`` (text lines, no figure, page or
            JSON) asks for: None (the app's default) when its text line shows attention, False
            when it does not, so that nothing computes it.
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
        return None

    def run_line(self, run: Run) -> str:
        """The last line ``train`` prints (`attnkit.apps.results.Run.line` with the
        ``headline``)."""
        return run.line(self.headline)
