"""``attnkit sentiment train|eval|predict``: argument parsing only (the work is in apps/)."""

from __future__ import annotations

import argparse
import json
import sys

from attnkit.cli.common import add_train_options

EXAMPLES = """examples:
  attnkit sentiment train --preset keras2018 --data ../shared/data/imdb --out runs/imdb2018
  attnkit sentiment train --preset best --data aclImdb_v1.tar.gz --out runs/imdb --max-minutes 15
  attnkit sentiment train --preset keras2018 --data download --out runs/imdb   # fetch + checksum
  attnkit sentiment eval --run runs/imdb --data ../shared/data/imdb/test.jsonl.gz --json
  attnkit sentiment predict --run runs/imdb "A slow start, but a moving, beautiful film."
  attnkit sentiment predict --run runs/imdb --html review.html "Dull and far too long."

--data is an aclImdb/ folder, aclImdb_v1.tar.gz, a folder with train/test .jsonl.gz or .csv,
a single .jsonl[.gz]/.csv file ({"text", "label"}; label 0/1 or neg/pos), or "download".
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "sentiment", help="movie-review sentiment with self-attention (IMDB)",
        description="Train, evaluate and explain self-attention sentiment classifiers.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    t = sub.add_parser("train", help="train a run", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--preset", choices=["keras2018", "best"], default="keras2018")
    t.add_argument("--data", required=True, help="training data (see below)")
    t.add_argument("--test-data", help="test split location (default: --data when it has one)")
    t.add_argument("--out", help="run folder to create")
    t.add_argument("--valid-fraction", type=float,
                   help="share of train held out for validation/selection (default: the "
                        "preset's, 0.1 for keras2018, 0.04 for best)")
    add_train_options(t)
    t.add_argument("--tokenizer", choices=["word", "char", "subword"],
                   help="override the preset's tokenizer")
    t.add_argument("--num-words", type=int, help="vocabulary size (default: the preset's)")
    t.add_argument("--maxlen", type=int, help="tokens kept per review (default: the preset's)")
    t.add_argument("--padding", choices=["pre", "post"], help="padding side (default pre)")
    t.add_argument("--no-mask", action="store_true",
                   help="the 2018 behaviour: padding is attended and max-pooled")
    t.add_argument("--no-test-curve", action="store_true",
                   help="do not log test accuracy after each epoch")
    t.add_argument("--skip-bad", action="store_true", help="skip (and count) malformed records")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=run_train)

    e = sub.add_parser("eval", help="accuracy of a run on a data set")
    e.add_argument("--run", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--split", choices=["train", "test"], default="test")
    e.add_argument("--device", default="cpu")
    e.add_argument("--skip-bad", action="store_true")
    e.add_argument("--json", action="store_true", help="print one JSON object (last line)")
    e.set_defaults(func=run_eval)

    p = sub.add_parser("predict", help="probability + review shaded by per-word importance")
    p.add_argument("--run", required=True)
    p.add_argument("texts", nargs="+", metavar="TEXT")
    p.add_argument("--html", metavar="FILE", help="also write an HTML page")
    p.add_argument("--device", default="cpu")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.add_argument("--json", action="store_true", help="print JSON (probabilities + scores)")
    p.set_defaults(func=run_predict)
    return parser


def run_train(args) -> int:
    from attnkit.apps.sentiment import train

    if not args.out and not args.resume:
        raise SystemExit("attnkit sentiment train: error: give --out RUN (or --resume RUN)")
    overrides = {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                 "seed": args.seed, "device": args.device, "max_minutes": args.max_minutes,
                 "progress": not args.no_progress}
    result = train(args.data, args.resume or args.out, preset=args.preset,
                   valid_fraction=args.valid_fraction, test_data=args.test_data,
                   track_test=not args.no_test_curve, mask_padding=not args.no_mask,
                   padding=args.padding, tokenizer=args.tokenizer, resume=bool(args.resume),
                   skip_bad=args.skip_bad, num_words=args.num_words, maxlen=args.maxlen,
                   **overrides)
    from pathlib import Path

    from attnkit.apps.sentiment import format_curve

    run = Path(args.resume or args.out)
    print(format_curve(run, **({} if args.preset == "keras2018" else {"baseline": ()})))
    test = run / "test_metrics.json"
    test_acc = json.loads(test.read_text())["accuracy"] if test.is_file() else None
    print(f"run: {run}  stop: {result.stop_reason}  best validation accuracy: "
          f"{result.best_metric}  test accuracy of that checkpoint: {test_acc}")
    return 0


def run_eval(args) -> int:
    from attnkit.apps.sentiment import evaluate

    metrics = evaluate(args.run, args.data, split=args.split, skip_bad=args.skip_bad,
                       device=args.device)
    if args.json:
        print(json.dumps(metrics))
    else:
        print(f"accuracy {metrics['accuracy']:.4f}  loss {metrics['loss']:.4f}  "
              f"({metrics['examples']} reviews)")
    return 0


def run_predict(args) -> int:
    from attnkit.apps.sentiment import predict
    from attnkit.viz.text import shade_text_ansi, shade_text_html

    preds = predict(args.run, args.texts, device=args.device)
    if args.json:
        print(json.dumps([p.to_dict() for p in preds], ensure_ascii=False))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        for p in preds:
            label = "positive" if p.prob >= 0.5 else "negative"
            print(f"P(positive) = {p.prob:.4f}  ({label})")
            print(shade_text_ansi(p.tokens, p.scores, color=color) if p.tokens else "(no tokens)")
    if args.html:
        _write_html(args.html, preds, shade_text_html)
        print(f"wrote {args.html}")
    return 0


def _write_html(path, preds, shade) -> None:
    from pathlib import Path

    from attnkit.fileio import atomic_write_bytes

    rows = "\n".join(
        f"<p><b>P(positive) = {p.prob:.4f}</b></p><p>{shade(p.tokens, p.scores)}</p>"
        for p in preds)
    page = ("<!doctype html><meta charset='utf-8'><title>attnkit sentiment</title>"
            "<p>Shading: share of the model's pooled features won by each word "
            "(max pooling) or its attention-pooling weight.</p>\n" + rows + "\n")
    atomic_write_bytes(Path(path), page.encode("utf-8"))
