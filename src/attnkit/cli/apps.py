"""``attnkit APP train|eval|predict|...`` for every app in `attnkit.apps.APPS`, built from the
app's declared options: those every app shares, declared once here (listed in
docs/guide/options.md; one left out is None, so an app tells "not given" from "given"), plus
its own `Option` s and ``commands``. Argument parsing and printing only (the work is the app's).
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import signal
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attnkit import fileio
from attnkit.errors import UsageError

AMP_CHOICES = {"auto": "auto", "on": True, "off": False}


def add_train_options(parser: argparse.ArgumentParser, **help_text: str) -> None:
    """Add the common ``train`` options to ``parser``; ``help_text`` overrides a help by dest name
    (``lr="default 1e-3"``). ``--data`` is optional: a resume takes the run's.
    """
    def add(flag: str, default_help: str | None = None, **kw) -> None:
        dest = flag[2:].replace("-", "_")
        parser.add_argument(flag, help=help_text.get(dest, default_help), **kw)

    add("--data", "training data")
    add("--out", "the run folder to create", metavar="RUN")
    add("--resume", "continue the interrupted run in RUN (or in --out) exactly; its stored "
        "settings are kept", nargs="?", const=True, metavar="RUN")
    add("--overwrite", "replace the run already in --out", action="store_true")
    add("--epochs", type=int)
    add("--batch-size", type=int)
    add("--lr", type=float)
    add("--seed", "random seed: data split, initial weights, batch order (default 0)", type=int)
    add("--max-minutes", "stop cleanly after this wall-clock budget (0 = no budget; default "
        "none)", type=float)
    add("--patience", "stop after N evaluations without a better validation score (0 = never "
        "stop early; default 3)", type=int, metavar="N")
    add_runtime_options(parser, threads_help=help_text.get(
        "threads", "CPU threads for torch (default: torch's, one per core; a resume: the "
        "run's)"))
    add("--amp", "bf16 autocast: auto (default) = on with CUDA or a CPU with native bf16 (AMX / "
        "AVX512-BF16), off otherwise", choices=list(AMP_CHOICES))
    add("--compile", "compile the training step with torch.compile: auto (default) = on a CPU "
        "for a model that trains faster compiled (translate's Transformer) in a run of at least "
        "1000 steps and no budget under 10 minutes; a resume runs the way the run ran",
        choices=("auto", "on", "off"))
    add("--no-progress", "no progress bar", action="store_true")


def add_runtime_options(parser: argparse.ArgumentParser, *,
                        threads_help: str | None = None) -> None:
    """``--threads`` and ``--device``, for every command that runs a model (``threads_help``:
    an app's own help, when it sets another default with ``parser.set_defaults``)."""
    parser.add_argument("--threads", type=int, metavar="N",
                        help=threads_help or "CPU threads for torch (default: torch's, one per "
                        "core)")
    parser.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N "
                        "(default: auto when training, cpu otherwise)")


def train_target(args: argparse.Namespace) -> tuple[Path, bool]:
    """The run folder and whether to resume, from ``--out`` and ``--resume [RUN]``."""
    resume = args.resume is not None
    if isinstance(args.resume, str):
        if args.out and Path(args.out) != Path(args.resume):
            raise UsageError(f"--resume {args.resume} and --out {args.out} name two folders; "
                             "give one")
        return Path(args.resume), True
    if not args.out:
        raise UsageError("give the run folder with --out RUN (or --resume RUN)")
    return Path(args.out), resume


def train_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The common training options the user gave, as keyword arguments for ``train``.
    ``--max-minutes 0`` means no budget (None)."""
    out = {k: getattr(args, k) for k in ("epochs", "batch_size", "lr", "seed", "device",
                                         "compile", "patience") if getattr(args, k) is not None}
    if args.amp is not None:
        out["amp"] = AMP_CHOICES[args.amp]
    if args.max_minutes is not None:
        out["max_minutes"] = args.max_minutes or None
    if args.no_progress:
        out["progress"] = False
    return out


def apply_threads(threads: int | None) -> None:
    """``torch.set_num_threads`` when ``--threads`` was given."""
    if threads is None:
        return
    if threads < 1:
        raise UsageError(f"--threads must be at least 1, got {threads}")
    import torch

    torch.set_num_threads(threads)


def read_inputs(inputs: Sequence[str], what: str) -> list[str]:
    """The inputs given as arguments, else the non-empty lines of stdin (capped by
    `attnkit.fileio.MAX_TEXT_BYTES` and `MAX_TEXT_LINES`; bytes not UTF-8 become U+FFFD, with a
    note). UsageError: no input, or a blank argument; DataError: stdin past a cap.
    """
    if inputs:
        for i, text in enumerate(inputs, 1):
            if not text.strip():
                raise UsageError(f"{what} {i} is empty: nothing to predict")
        return [_valid_text(text, f"{what} {i}") for i, text in enumerate(inputs, 1)]
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(f"no {what} given: pass one as an argument or one per line on stdin")
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:   # a text stream in stdin's place (an embedding program, a test)
        text = sys.stdin.read(fileio.MAX_TEXT_BYTES + 1)   # chars: at least as many bytes
        stream = io.BytesIO(text.encode("utf-8", "surrogateescape"))
    raw = fileio.read_user_input(stream, "stdin")
    lines = [_valid_text(line.rstrip(b"\r"), f"line {i} of stdin")
             for i, line in enumerate(raw.split(b"\n"), 1)]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise UsageError(f"no {what} given: stdin was empty")
    return lines


def _valid_text(text: bytes | str, where: str) -> str:
    """``text`` as valid Unicode: undecodable bytes (raw, or the surrogates Python keeps for
    them in arguments) replaced by U+FFFD, with a note saying how many."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    clean = data.decode("utf-8", "replace")
    bad = clean.count("\ufffd") - data.count("\ufffd".encode())
    if bad:
        print(f"attnkit: note: {where}: {bad} invalid UTF-8 sequence(s) replaced by U+FFFD",
              file=sys.stderr)
    return clean


def exit_code(run: Any) -> int:
    """0, or ``128 + signal`` for a run stopped by a signal (143 for SIGTERM, 130 for
    SIGINT), as a shell expects of a killed command."""
    return 128 + int(signal.Signals[run.signal]) if run.stop_reason == "signal" else 0


def example_epilog(*lines: str) -> str:
    """An argparse epilog listing examples (use with RawDescriptionHelpFormatter)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


_formatter = functools.partial(argparse.RawDescriptionHelpFormatter, max_help_position=32)


def add_app_parser(subparsers: Any, app: Any) -> argparse.ArgumentParser:
    """The ``attnkit APP`` parser with ``train``, ``eval``, ``predict`` and the app's own
    commands."""
    epilog = example_epilog(*app.examples) if app.examples else None
    parser = subparsers.add_parser(app.name, help=app.help, description=app.description,
                                   formatter_class=_formatter, epilog=epilog)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    threads = {c: app.default_threads.get(c) for c in ("eval", "predict")}

    def add(name: str, help: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, formatter_class=_formatter,
                              **{"epilog": epilog, **kw})

    t = add("train", "train a run folder, then score its test split")
    add_train_options(t, **app.train_help)
    _add_options(t, app.options, "train")
    # No default threads here: train tells "not given" (a resume keeps the run's) from given.
    t.set_defaults(func=functools.partial(run_train, app))
    e = add("eval", f"score a run ({app.eval_help})")
    p = add("predict", f"predict {app.inputs}s and show their attention")
    for q in (e, p):
        q.add_argument("--run", required=True, metavar="RUN", help="a trained run folder")
    e.add_argument("--data", help=app.eval_data_help)
    e.add_argument("--json", action="store_true",
                   help="print the metrics as one JSON object (the last line)")
    e.add_argument("--report", metavar="FILE.html",
                   help="also write an HTML report with examples and their attention")
    p.add_argument("inputs", nargs="*", metavar=app.inputs.upper(),
                   help=f"{app.inputs}s (none: read one per line from stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON object per input")
    p.add_argument("--html", metavar="FILE.html",
                   help="also write an attention explorer page for the inputs")
    p.add_argument("--plot", *app.plot_aliases, dest="plot", metavar="FILE",
                   help="also write each input's attention figure (.png/.svg/.pdf; several "
                   "inputs: FILE-1.png, FILE-2.png, ...)")
    for name, q, run in (("eval", e, run_eval), ("predict", p, run_predict)):
        add_runtime_options(q, threads_help=app.train_help.get("threads")
                            if threads[name] else None)
        _add_options(q, app.options, name)
        q.set_defaults(func=functools.partial(run, app), threads=threads[name])
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
            continue
        kw = {"action": "store_const", "const": o.const} if o.type is None else {
            "type": o.type, "choices": list(o.choices) if o.choices else None,
            "metavar": o.metavar, "required": o.required}
        parser.add_argument(o.flag, dest=o.name, default=o.default, help=o.help, **kw)


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
    loaded = app.load(args.run, device=args.device, **_values(args, app.options, "eval", "load"))
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
    loaded = app.load(args.run, device=args.device, **_values(args, app.options, "predict", "load"))
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
