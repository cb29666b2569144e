"""The ``attnkit`` command: ``attnkit translate|sentiment|caption|demo ...``.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``; modules are imported
lazily so that ``attnkit --help`` stays fast and one broken app never hides another.

Every mistake a user can make on the command line ends as one line ``attnkit: error: ...`` and
exit status 2: argparse's own errors (see :class:`OneLineParser`) and every
:class:`~attnkit.errors.AttnkitError` an app raises. A signal stop exits ``128 + signal``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version

from attnkit.errors import AttnkitError

SUBCOMMANDS = {
    "translate": "attnkit.cli.translate",
    "sentiment": "attnkit.cli.sentiment",
    "caption": "attnkit.cli.caption",
    "demo": "attnkit.cli.demo",
}


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command to ask for help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"attnkit: error: {message} (see '{self.prog} --help')\n")


def _version() -> str:
    try:
        return version("attnkit")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="attnkit",
        description="Attention mechanisms for PyTorch, and applications that show them at work.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  attnkit translate train --data synthetic --out runs/fr\n"
        "  attnkit translate predict --run runs/fr \"I am cold.\" --html cold.html\n"
        "  attnkit sentiment train --preset keras2018 --data imdb.jsonl.gz --out runs/imdb\n"
        "  attnkit caption train --out runs/ducks\n",
    )
    parser.add_argument("--version", action="version", version=f"attnkit {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in SUBCOMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # that application is not installed in this build
        module.add_parser(sub)
    return parser


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"attnkit: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    # A warning for the user (e.g. bf16 autocast on a CPU without bf16) is one line, not a
    # source location and a code line.
    warnings.formatwarning = _one_line_warning
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except AttnkitError as exc:
        print(f"attnkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`attnkit ... | head`): not an error of ours. Point stdout at
        # /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
