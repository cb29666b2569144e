"""The ``attnkit`` command: ``attnkit translate|sentiment|caption|demo ...``.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``; modules are imported
lazily so that ``attnkit --help`` stays fast and one broken app never hides another.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attnkit.errors import AttnkitError

SUBCOMMANDS = {
    "translate": "attnkit.cli.translate",
    "sentiment": "attnkit.cli.sentiment",
    "caption": "attnkit.cli.caption",
    "demo": "attnkit.cli.demo",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnkit",
        description="Attention mechanisms for PyTorch, and applications that show them at work.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  attnkit translate train --data synthetic --out runs/fr\n"
        "  attnkit translate predict --run runs/fr \"I am cold.\" --plot cold.png\n"
        "  attnkit sentiment train --preset keras2018 --data imdb.jsonl.gz --out runs/imdb\n"
        "  attnkit caption train --out runs/ducks\n",
    )
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AttnkitError as exc:
        print(f"attnkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
