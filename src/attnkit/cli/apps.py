"""``attnkit APP train|eval|predict|...`` for every app in `attnkit.apps.APPS`, built from the
app's declared options (the common ones, `attnkit.cli.common`, plus its own `Option` s and
``commands``): argument parsing and printing only (the work is the app's).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterable
from typing import Any

from attnkit.cli.common import (
    add_eval_options,
    add_predict_options,
    add_runtime_options,
    add_train_options,
    apply_threads,
    example_epilog,
    exit_code,
    read_inputs,
    train_overrides,
    train_target,
)

_formatter = functools.partial(argparse.RawDescriptionHelpFormatter, max_help_position=32)


def add_app_parser(subparsers: Any, app: Any) -> argparse.ArgumentParser:
    """The ``attnkit APP`` parser with ``train``, ``eval``, ``predict`` and the app's own
    commands."""
    epilog = example_epilog(*app.examples) if app.examples else None
    parser = subparsers.add_parser(app.name, help=app.help, description=app.description,
                                   formatter_class=_formatter, epilog=epilog)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    threads = {c: app.default_threads.get(c) for c in ("eval", "predict")}
    threads_help = {c: app.train_help.get("threads") if n else None for c, n in threads.items()}

    def add(name: str, help: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, formatter_class=_formatter,
                              **{"epilog": epilog, **kw})

    t = add("train", "train a run folder, then score its test split")
    add_train_options(t, **app.train_help)
    _add_options(t, app.options, "train")
    # No default threads here: train tells "not given" (a resume keeps the run's) from given.
    t.set_defaults(func=functools.partial(run_train, app))
    e = add("eval", f"score a run ({app.eval_help})")
    add_eval_options(e, app.eval_data_help, threads_help=threads_help["eval"])
    _add_options(e, app.options, "eval")
    e.set_defaults(func=functools.partial(run_eval, app), threads=threads["eval"])
    p = add("predict", f"predict {app.inputs}s and show their attention")
    add_predict_options(p, app.inputs.upper(), f"{app.inputs}s",
                        threads_help=threads_help["predict"], plot_aliases=app.plot_aliases)
    _add_options(p, app.options, "predict")
    p.set_defaults(func=functools.partial(run_predict, app), threads=threads["predict"])
    for command in app.commands:
        c = add(command.name, command.help, description=command.help,
                epilog=example_epilog(*command.examples) if command.examples else epilog)
        _add_options(c, command.arguments, None)
        if command.runtime:
            add_runtime_options(c)
        c.set_defaults(func=functools.partial(run_command, command))
    return parser


def _add_options(parser: argparse.ArgumentParser, options: Iterable[Any],
                 command: str | None) -> None:
    for o in options:
        if command is not None and command not in o.commands:
            continue
        if not o.flag.startswith("-"):
            parser.add_argument(o.name, type=o.type, help=o.help, metavar=o.metavar)
        elif o.type is None:
            parser.add_argument(o.flag, dest=o.name, action="store_const",
                                const=o.const, default=o.default, help=o.help)
        else:
            parser.add_argument(o.flag, dest=o.name, type=o.type,
                                choices=list(o.choices) if o.choices else None,
                                default=o.default, help=o.help, metavar=o.metavar,
                                required=o.required)


def _values(args: argparse.Namespace, options: Iterable[Any], command: str,
            stage: str) -> dict[str, Any]:
    """The app options of ``command`` and ``stage`` the user gave (or that have a default)."""
    return {o.name: getattr(args, o.name) for o in options
            if command in o.commands and o.stage == stage and getattr(args, o.name) is not None}


def run_train(app: Any, args: argparse.Namespace) -> int:
    out, resume = train_target(args)
    given = {"data": args.data, **train_overrides(args),
             **_values(args, app.options, "train", "call")}
    run = app.train(given, out, resume=resume, overwrite=args.overwrite, threads=args.threads)
    if run.stop_reason != "signal":
        report = app.training_report(run)
        if report:
            print(report)
        print(run.line(app.headline))
    return exit_code(run)


def run_eval(app: Any, args: argparse.Namespace) -> int:
    apply_threads(args.threads)
    loaded = app.load(args.run, device=args.device,
                      **_values(args, app.options, "eval", "load"))
    metrics = app.evaluate(loaded, args.data, report=args.report,
                           **_values(args, app.options, "eval", "call"))
    print(json.dumps(app.json_metrics(metrics), ensure_ascii=False) if args.json
          else app.format_metrics(metrics))
    if args.report:
        print(f"wrote {args.report}", file=sys.stderr)
    return 0


def run_predict(app: Any, args: argparse.Namespace) -> int:
    from attnkit.apps.outputs import FIGURE, PAGE, numbered_paths, output_file
    from attnkit.apps.prediction import write_page

    apply_threads(args.threads)
    inputs = read_inputs(args.inputs, app.inputs)
    # Output files are checked before any work, so a bad name costs nothing.
    plots = numbered_paths(args.plot, len(inputs)) if args.plot else []
    for path in plots:
        output_file(path, FIGURE)
    if args.html:
        output_file(args.html, PAGE)
    loaded = app.load(args.run, device=args.device,
                      **_values(args, app.options, "predict", "load"))
    # Attention only as much as something shows: the page shows every layer and head, a
    # figure one row per token, JSON what the app gives by default, a text line what it needs.
    attention = ("all" if args.html else True if args.plot else None if args.json
                 else app.text_attention)
    preds = app.predict(loaded, inputs, attention=attention,
                        **_values(args, app.options, "predict", "call"))
    show = _values(args, app.options, "predict", "show")
    for i, p in enumerate(preds, 1):
        print(json.dumps(p.to_dict(), ensure_ascii=False) if args.json else p.text_line(**show))
        for level, line in (("warning", p.warning()), ("note", p.note())):
            if line:
                print(f"attnkit: {level}: {app.inputs} {i}: {line}", file=sys.stderr)
    for p, path in zip(preds, plots, strict=False):
        print(f"wrote {p.render(path)}", file=sys.stderr)
    if args.html:
        print(f"wrote {write_page(preds, args.html, loaded.summary())}", file=sys.stderr)
    return 0


def run_command(command: Any, args: argparse.Namespace) -> int:
    values = {o.name: getattr(args, o.name) for o in command.arguments}
    if command.runtime:
        apply_threads(args.threads)
        values["device"] = args.device
    return int(command.run(values) or 0)
