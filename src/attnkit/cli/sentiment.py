"""``attnkit sentiment train|eval|predict``: argument parsing only (the work is in apps/)."""

from __future__ import annotations

import argparse
import json
import sys

from attnkit.cli.common import (
    add_eval_options,
    add_predict_options,
    add_train_options,
    apply_threads,
    example_epilog,
    exit_code,
    given,
    read_inputs,
    train_overrides,
    train_target,
)

DATA_FORMS = """
--data is an aclImdb/ folder, aclImdb_v1.tar.gz, a folder with train/test .jsonl.gz or .csv,
a single .jsonl[.gz]/.csv file ({"text", "label"}; label 0/1 or neg/pos), or "download"."""
TRAIN_EXAMPLES = example_epilog(
    "attnkit sentiment train --preset keras2018 --data ../shared/data/imdb --out runs/imdb2018",
    "attnkit sentiment train --preset best --data aclImdb_v1.tar.gz --out runs/imdb "
    "--max-minutes 15",
    "attnkit sentiment train --preset keras2018 --data download --out runs/imdb   # fetch + check",
    "attnkit sentiment train --resume runs/imdb --epochs 8     # continue, with a larger budget",
    "attnkit sentiment train --data reviews.jsonl --out runs/imdb --overwrite",
) + "\n" + DATA_FORMS
EVAL_EXAMPLES = example_epilog(
    "attnkit sentiment eval --run runs/imdb                  # the run's own test split",
    "attnkit sentiment eval --run runs/imdb --data ../shared/data/imdb/test.jsonl.gz --json",
    "attnkit sentiment eval --run runs/imdb --report imdb.html",
) + "\n" + DATA_FORMS
PREDICT_EXAMPLES = example_epilog(
    'attnkit sentiment predict --run runs/imdb "A slow start, but a moving, beautiful film."',
    'attnkit sentiment predict --run runs/imdb --html review.html "Dull and far too long."',
    "attnkit sentiment predict --run runs/imdb --json < reviews.txt   # one review per line",
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "sentiment", help="movie-review sentiment with self-attention (IMDB)",
        description="Train, evaluate and explain self-attention sentiment classifiers.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=TRAIN_EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    raw = argparse.RawDescriptionHelpFormatter
    _add_train(sub.add_parser("train", help="train a run", epilog=TRAIN_EXAMPLES,
                              formatter_class=raw))
    e = sub.add_parser("eval", help="accuracy of a run on a data set", epilog=EVAL_EXAMPLES,
                       formatter_class=raw)
    add_eval_options(e, "reviews to evaluate on (default: the run's own test data)")
    e.add_argument("--split", choices=["train", "test"], default="test",
                   help="the split of --data (default test)")
    e.add_argument("--skip-bad", action="store_true", help="skip (and count) malformed records")
    e.set_defaults(func=run_eval)
    p = sub.add_parser("predict", help="probability + review shaded by per-word importance",
                       epilog=PREDICT_EXAMPLES, formatter_class=raw)
    add_predict_options(p, "REVIEW", "review texts")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="shade the words in the terminal (default: when stdout is one)")
    p.set_defaults(func=run_predict)
    return parser


def _add_train(t: argparse.ArgumentParser) -> None:
    t.add_argument("--preset", choices=["keras2018", "best"],
                   help="model and recipe (default keras2018)")
    t.add_argument("--test-data", help="test split location (default: --data when it has one)")
    t.add_argument("--valid-fraction", type=float,
                   help="share of train held out for validation/selection (default: the "
                        "preset's, 0.1 for keras2018, 0.04 for best)")
    add_train_options(t, data_required=False,
                      data="training data (see below); a resume takes the run's",
                      epochs="default: the preset's (5 keras2018, 1 best)",
                      batch_size="default 64", lr="default: the preset's (1e-3 keras2018, "
                      "2e-3 best)")
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
    t.set_defaults(func=run_train)


def run_train(args) -> int:
    from attnkit.apps.sentiment import format_curve, train

    out, resume = train_target(args)
    apply_threads(args.threads)
    # Flags left off stay None, so a resume can tell them from a change of the run.
    overrides = {**train_overrides(args), **given(
        preset=args.preset, valid_fraction=args.valid_fraction, test_data=args.test_data,
        tokenizer=args.tokenizer, num_words=args.num_words, maxlen=args.maxlen,
        padding=args.padding, mask_padding=False if args.no_mask else None,
        track_test=False if args.no_test_curve else None,
        skip_bad=True if args.skip_bad else None)}
    result = train(args.data, out, resume=resume, overwrite=args.overwrite, **overrides)
    if result.stop_reason == "signal":
        return exit_code(result)
    print(format_curve(out))
    test = out / "test_metrics.json"
    test_acc = json.loads(test.read_text(encoding="utf-8"))["accuracy"] if test.is_file() \
        else None
    print(f"run: {out}  stop: {result.stop_reason}  best validation accuracy: "
          f"{result.best_metric}  test accuracy of that checkpoint: {test_acc}")
    return exit_code(result)


def run_eval(args) -> int:
    from attnkit.apps.sentiment import evaluate

    apply_threads(args.threads)
    metrics = evaluate(args.run, args.data, split=args.split, skip_bad=args.skip_bad,
                       device=args.device, report=args.report)
    if args.report:
        print(f"wrote {args.report}")
    if args.json:
        print(json.dumps(metrics))
    else:
        print(f"accuracy {metrics['accuracy']:.4f}  loss {metrics['loss']:.4f}  "
              f"({metrics['examples']} reviews of {metrics['data']}, {metrics['split']})")
    if metrics["truncated"]:
        print(f"attnkit: note: {metrics['truncated']} of {metrics['examples']} reviews were "
              "longer than the model reads; their cut tokens were not seen", file=sys.stderr)
    return 0


def run_predict(args) -> int:
    from attnkit.apps.prediction import write_page
    from attnkit.apps.sentiment import load_run, predict
    from attnkit.viz.text import shade_text_ansi

    apply_threads(args.threads)
    texts = read_inputs(args.inputs, "review")
    run = load_run(args.run, device=args.device)
    preds = predict(run, texts)
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    for i, p in enumerate(preds, 1):
        _note(i, p)
        if args.json:
            print(json.dumps(p.to_dict(), ensure_ascii=False))
        else:
            print(f"P(positive) = {p.prob:.4f}  ({p.label})")
            print(shade_text_ansi(p.tokens, p.weights, color=color))
    if args.html:
        write_page(preds, args.html, run.summary())
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _note(i: int, pred) -> None:
    """One line on stderr when the model could not read all of review ``i``."""
    parts = []
    if pred.unknown:
        parts.append(f"{pred.unknown:.0%} of its {len(pred.tokens)} token(s) are unknown to the "
                     "model's vocabulary")
    if pred.truncated:
        parts.append(f"{pred.truncated} token(s) cut off (the model reads {len(pred.tokens)})")
    if parts:
        print(f"attnkit: note: review {i}: {'; '.join(parts)}", file=sys.stderr)
