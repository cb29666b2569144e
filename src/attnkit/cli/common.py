"""Options every ``<app> train`` command shares, declared once."""

from __future__ import annotations

import argparse


def add_train_options(parser: argparse.ArgumentParser, *, max_minutes_default=None,
                      **help_text: str) -> None:
    """Add ``--resume --epochs --batch-size --lr --seed --device --max-minutes`` to ``parser``.

    ``help_text`` overrides the help of an option by its dest name (e.g. ``lr="default 1e-3"``),
    so each application can state its own defaults.
    """
    def add(flag: str, dest: str, default_help: str | None = None, **kw) -> None:
        parser.add_argument(flag, help=help_text.get(dest, default_help), **kw)

    add("--resume", "resume", "continue an interrupted run exactly", metavar="RUN_DIR")
    add("--epochs", "epochs", type=int)
    add("--batch-size", "batch_size", type=int)
    add("--lr", "lr", type=float)
    add("--seed", "seed", "random seed (default 0)", type=int, default=0)
    add("--device", "device", "auto | cpu | cuda | cuda:N", default="auto")
    add("--max-minutes", "max_minutes", "stop cleanly after this wall-clock budget",
        type=float, default=max_minutes_default)
