"""The ``attnkit`` command: ``attnkit APP train|eval|predict ...`` for every registered app
(`attnkit.cli.apps`), and ``attnkit serve`` (`attnkit.cli.serve`).

A plugin app is imported only when it is the command asked for, within a time limit. Every
mistake a user can make ends as one line ``attnkit: error: ...`` and exit status 2
(`OneLineParser`, and every `attnkit.errors.AttnkitError` an app raises); a signal stop exits
``128 + signal`` with one line at most.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version

from attnkit.allocator import reuse_freed_memory
from attnkit.errors import AttnkitError, Interrupted, UsageError


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command to ask for help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"attnkit: error: {message} (see '{self.prog} --help')\n")


def _version() -> str:
    try:
        return version("attnkit")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser: only the app ``argv`` names is imported (else the built-in ones, plugins
    named from their metadata, so a plugin that hangs never holds ``--help``). UsageError: a
    plugin asked for that cannot be loaded or whose options cannot be built.
    """
    from attnkit.apps.registry import APPS, PluginWarning
    from attnkit.cli.apps import add_app_parser
    from attnkit.cli.serve import add_serve_parser

    parser = OneLineParser(
        prog="attnkit",
        description="Attention mechanisms for PyTorch, and applications that show them at work.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  attnkit translate train --data synthetic --out runs/fr\n"
        "  attnkit translate predict --run runs/fr \"I am cold.\" --html cold.html\n"
        "  attnkit sentiment train --preset keras2018 --data imdb.jsonl.gz --out runs/imdb\n"
        "  attnkit caption train --out runs/ducks\n"
        "  attnkit caption scene --out duck.png && attnkit caption predict --run runs/ducks "
        "duck.png\n"
        "  attnkit serve --run runs/fr --run runs/imdb      # http://127.0.0.1:8000/\n",
    )
    parser.add_argument("--version", action="version", version=f"attnkit {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    names = APPS.names()
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    add_serve_parser(sub)
    for name in names:
        builtin = APPS.is_builtin(name)
        if name != wanted and (not builtin or wanted in (*names, "serve")):   # not imported
            origin = "" if builtin else f" (from {APPS.origin(name)})"
            sub.add_parser(name, help=f"the {name} app{origin}")
            continue
        try:
            app = APPS[name]
            if not builtin:   # tried on a parser of its own: a failure leaves none half-built
                _check_app_parser(app, APPS.origin(name))
        except UsageError as exc:
            if name == wanted:
                raise
            # A broken plugin never takes the other commands with it.
            warnings.warn(f"{exc}; skipped", PluginWarning, stacklevel=2)
            continue
        add_app_parser(sub, app)
    return parser


def _check_app_parser(app, origin: str) -> None:
    """UsageError (naming ``origin``) when a plugin app's parser cannot be built."""
    from attnkit.cli.apps import add_app_parser

    try:
        add_app_parser(OneLineParser(prog="attnkit").add_subparsers(), app)
    # Whatever a plugin's declarations raise is the plugin's fault, never the CLI's: the
    # built-in commands must keep working (the `registry._load` rule).
    except Exception as exc:
        raise UsageError(f"the app {app.name!r} (from {origin}) declares options attnkit "
                         f"cannot build: {type(exc).__name__}: {exc}") from None


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"attnkit: warning: {message}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run ``attnkit ARGV`` and return its exit status; a warning for the user is one line, and
    the process's warning settings are restored on return.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        # Nothing heavy is imported before the ``try`` below: torch and the apps load inside it,
        # so Ctrl-C while they load is the one line of KeyboardInterrupt, not a traceback.
        argv = sys.argv[1:] if argv is None else list(argv)
        # The command owns its process: freed tensors stay for reuse by the next step or request
        # instead of going back to the system (attnkit.allocator; docs/results.md).
        reuse_freed_memory()
        if argv[:1] == ["serve"] and not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):
            # Before torch loads OpenMP: its workers spin briefly between parallel regions, then
            # sleep. A team spinning long starves the server's event loop, one that sleeps at once
            # is woken at every operation of a decoder step (docs/results.md). A value the user
            # set is kept.
            os.environ.update(OMP_WAIT_POLICY="ACTIVE", GOMP_SPINCOUNT="10000")
        try:
            parser = build_parser(argv)
            if not argv:
                parser.print_help()
                return 0
            args = parser.parse_args(argv)
            return int(args.func(args) or 0)
        except AttnkitError as exc:
            print(f"attnkit: error: {exc}", file=sys.stderr)
            return 2
        except Interrupted as exc:
            print(f"attnkit: interrupted by {exc}" + (f"; {exc.hint}" if exc.hint else ""),
                  file=sys.stderr)
            return 128 + exc.signum
        except KeyboardInterrupt:
            print("attnkit: interrupted", file=sys.stderr)
            return 128 + signal.SIGINT
        except BrokenPipeError:
            # The reader went away (`attnkit ... | head`): not an error of ours. Point stdout at
            # /dev/null so the interpreter's final flush does not raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
