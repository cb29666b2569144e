"""``attnkit translate train|eval|predict|export``: argument parsing only (the work is in
apps/)."""

from __future__ import annotations

import argparse
import json
import sys

from attnkit.cli.common import (
    add_eval_options,
    add_predict_options,
    add_train_options,
    apply_threads,
    exit_code,
    given,
    read_inputs,
    train_overrides,
    train_target,
)

EXAMPLES = """examples:
  attnkit translate train --data synthetic --out runs/demo        # ~3 min on 2 CPU cores
  attnkit translate train --data synthetic --out runs/luong --attention general --style luong
  attnkit translate train --data synthetic --out runs/base --attention none   # no attention
  attnkit translate train --data ../shared/data/eng-fra --out runs/fr --arch transformer \\
      --max-minutes 30
  attnkit translate train --resume runs/fr --max-minutes 60        # continue an interrupted run
  attnkit translate eval --run runs/demo --data synthetic --beam 5 --json
  attnkit translate predict --run runs/demo "The cat does not see her." --plot cat.png
  attnkit translate predict --run runs/demo "I am cold." --html cold.html   # every layer/head
  echo "I will take these letters." | attnkit translate predict --run runs/demo --json

  # CTranslate2 (pip install 'attnkit[serve]'): a Transformer run trained with --subword
  attnkit translate export runs/fr runs/fr-ct2 --quantization int8
  attnkit translate eval --run runs/fr-ct2 --engine ctranslate2 --beam 5 --json
  attnkit translate predict --run runs/fr-ct2 --engine ctranslate2 "I am cold."

--data is "synthetic" (built-in grammar corpus), "tatoeba" (download), a folder with
train/valid/test .tsv[.gz] files, or one english<TAB>french pairs file (split 96/2/2).
"""

# One thread by default: these small models gain little from more, and on a busy CPU the
# extra threads only contend (a second thread on a shared 2-core CPU cut training steps ~10x).
THREADS_HELP = "CPU threads for torch (default 1, the fastest for these small models)"
DATA_HELP = "synthetic | tatoeba | PATH (default: the run's test split)"
# Translate's own train options: (flag, type, help); all default to None ("not given").
TRAIN_OPTIONS = (
    ("--hidden", int, "RNN hidden size (default 128)"),
    ("--emb-dim", int, "RNN embedding size (default 64)"),
    ("--layers", int, "RNN or Transformer layers (default 1 rnn, 2 transformer)"),
    ("--window", int, "local attention half-width D (default 5)"),
    ("--d-model", int, "Transformer width (default 128)"),
    ("--heads", int, "Transformer heads (default 4)"),
    ("--ff-dim", int, "Transformer feed-forward size (default 256)"),
    ("--dropout", float, "dropout (default 0.1)"),
    ("--teacher-forcing", float, "probability of feeding the gold token (RNN; default 1.0)"),
    ("--label-smoothing", float, "label smoothing of the loss (default 0)"),
    ("--train-size", int, "synthetic training pairs (default 20000)"),
    ("--max-len", int, "drop training pairs longer than this many tokens (default 30)"),
    ("--min-freq", int, "keep words seen this often in training (default 1)"),
    ("--max-vocab", int, "largest vocabulary per language, specials included (default 30000)"),
    ("--subword", int, "joint English+French sentencepiece vocabulary of about N pieces, "
     "trained on the training text and saved in the run (default: words)"),
    ("--batch-tokens", int, "also cap each batch at N padded tokens (per side)"),
    ("--warmup", int, "warm-up steps (default 0 rnn, 300 transformer)"),
    ("--eval-every", int, "validate every N steps (default once per epoch and at the stop)"),
    ("--valid-sample", int, "validation sentences decoded for model selection (default 300)"),
    ("--examples", int, "test examples printed and put in report.html (default 10)"),
)
CHOICES = (
    ("--arch", ["rnn", "transformer"], "model (default rnn)"),
    ("--attention", ["additive", "bahdanau", "dot", "scaled_dot", "general", "concat",
                     "local-m", "local-p", "none"],
     "RNN score (default additive); none = fixed-length context baseline"),
    ("--cell", ["gru", "lstm"], "RNN cell (default gru)"),
    ("--style", ["bahdanau", "luong"], "RNN decoder style (default bahdanau)"),
    ("--schedule", ["constant", "linear", "cosine", "inverse_sqrt"],
     "learning-rate schedule; linear/cosine reach 0 at the end of --epochs (default constant "
     "for rnn, inverse_sqrt for transformer)"),
)
OWN_SETTINGS = [flag[2:].replace("-", "_") for flag, _, _ in TRAIN_OPTIONS + CHOICES]


def _sub(sub, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _decoding_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam", type=int, default=1, help="beam size (default 1 = greedy)")
    parser.add_argument("--alpha", type=float, default=0.6,
                        help="GNMT length penalty (beam > 1; default 0.6)")
    parser.add_argument("--no-unk-replace", action="store_true",
                        help="keep <unk> instead of copying the most attended source word")
    parser.add_argument("--engine", choices=["attnkit", "ctranslate2"], default="attnkit",
                        help="attnkit (default) or ctranslate2: then --run is a folder written "
                        "by `attnkit translate export` (no attention: no --html/--plot/--report,"
                        " <unk> kept)")


def _add_train(sub) -> None:
    t = _sub(sub, "train", "train a run folder, then score its test split")
    add_train_options(
        t, data_default="synthetic", threads=THREADS_HELP,
        epochs="default 8 (early stopping on validation BLEU)", batch_size="default 64",
        lr="default 3e-3 (rnn), 1e-3 (transformer)",
        max_minutes="training budget in minutes (default 2; 0 = no budget)")
    # data None: synthetic for a new run, the stored data on a resume.
    t.set_defaults(data=None, threads=1)
    for flag, choices, help_text in CHOICES:
        t.add_argument(flag, choices=choices, help=help_text)
    for flag, kind, help_text in TRAIN_OPTIONS:
        t.add_argument(flag, type=kind, help=help_text, metavar="N" if kind is int else None)
    t.add_argument("--strict", action="store_true",
                   help="a malformed data line is an error (default: skipped and counted)")
    t.set_defaults(func=run_train)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "translate", help="English -> French translation with attention (RNN or Transformer)",
        description="Train, evaluate and run attention translation models; plot alignments.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    _add_train(sub)

    e = _sub(sub, "eval", "BLEU/chrF of a run (free-running decoding, multi-reference)")
    add_eval_options(e, DATA_HELP, threads_help=THREADS_HELP)
    e.set_defaults(threads=1)
    _decoding_options(e)
    e.add_argument("--strict", action="store_true", help="a malformed data line is an error")
    e.set_defaults(func=run_eval)

    p = _sub(sub, "predict", "translate sentences (arguments, or stdin lines)")
    add_predict_options(p, "SENTENCE", "sentences to translate", threads_help=THREADS_HELP)
    p.set_defaults(threads=1)
    _decoding_options(p)
    p.add_argument("--plot", metavar="FILE", help="save the heatmap of the (first) sentence "
                   "(.png/.svg/.pdf); with several sentences FILE gets -2, -3 ... before its "
                   "extension")
    p.set_defaults(func=run_predict)

    x = _sub(sub, "export", "export a Transformer run (trained with --subword) to a "
             "self-contained CTranslate2 folder")
    x.add_argument("run", metavar="RUN", help="the translate run folder")
    x.add_argument("out", metavar="OUT", help="the folder to create (new or empty)")
    x.add_argument("--quantization", default="int8",
                   help="stored weight type: int8 (default), int8_float32, int8_float16, "
                   "int8_bfloat16, int16, float16, bfloat16 or float32")
    x.set_defaults(func=run_export)
    return parser


def run_train(args) -> int:
    from attnkit.apps.translate import train

    out, resume = train_target(args)
    apply_threads(args.threads)
    overrides = {**train_overrides(args),
                 **given(**{name: getattr(args, name) for name in OWN_SETTINGS})}
    if args.strict:
        overrides["strict"] = True
    result = train(args.data, out, resume=resume, overwrite=args.overwrite, **overrides)
    return exit_code(result)


def run_eval(args) -> int:
    from attnkit.apps.translate import evaluate
    from attnkit.apps.translate_metrics import format_table

    apply_threads(args.threads)
    metrics = evaluate(args.run, args.data, beam=args.beam, alpha=args.alpha,
                       device=args.device or "cpu", unk_replace=not args.no_unk_replace,
                       report=args.report, strict=args.strict, engine=args.engine,
                       log=lambda line: print(line, file=sys.stderr))
    _engine_note(args)
    print(format_table(metrics))
    if args.report:
        print(f"report: {args.report}")
    if args.json:
        print(json.dumps({k: metrics[k] for k in (
            "bleu", "chrf", "counts", "sentences", "references", "beam", "by_length",
            "signature", "single_ref", "sentences_per_s", "engine", "quantization",
            "truncated", "max_source_tokens", "unknown") if k in metrics}))
    return 0


def _plot_path(base: str, i: int) -> str:
    if i == 0:
        return base
    stem, dot, ext = base.rpartition(".")
    return f"{stem}-{i + 1}.{ext}" if dot else f"{base}-{i + 1}"


def run_predict(args) -> int:
    from attnkit.apps.prediction import write_page
    from attnkit.apps.translate import load_run, predict

    apply_threads(args.threads)
    sentences = read_inputs(args.inputs, "sentence")
    # Attention only when something shows it; the page shows every layer and head.
    need_weights = "all" if args.html else (True if args.plot else None)
    run = load_run(args.run, device=args.device or "cpu", engine=args.engine)
    predictions = predict(run, sentences, beam=args.beam, alpha=args.alpha,
                          unk_replace=not args.no_unk_replace, need_weights=need_weights)
    _engine_note(args)
    for i, p in enumerate(predictions):
        print(json.dumps(p.to_dict(), ensure_ascii=False) if args.json else p.text)
        if p.note():
            print(f"attnkit: note: sentence {i + 1}: {p.note()}", file=sys.stderr)
        if args.plot:
            print(f"heatmap: {p.render(_plot_path(args.plot, i))}", file=sys.stderr)
    if args.html:
        print(f"page: {write_page(predictions, args.html, run.summary())}", file=sys.stderr)
    return 0


def _engine_note(args) -> None:
    if args.engine == "ctranslate2" and not args.no_unk_replace:
        print("attnkit: note: the CTranslate2 engine computes no attention, so an output <unk> "
              "is kept (no unk replacement)", file=sys.stderr)


def run_export(args) -> int:
    from attnkit.apps.translate_ct2 import export_run

    out = export_run(args.run, args.out, quantization=args.quantization)
    print(f"exported: {out} (CTranslate2, {args.quantization}); use it with "
          f"--engine ctranslate2 --run {out}")
    return 0
