"""``attnkit translate train|eval|predict``: argument parsing only (the work is in apps/)."""

from __future__ import annotations

import argparse
import json
import sys

from attnkit.cli.common import add_train_options

EXAMPLES = """examples:
  attnkit translate train --data synthetic --out runs/demo        # ~3 min on 2 CPU cores
  attnkit translate train --data synthetic --out runs/luong --attention general --style luong
  attnkit translate train --data synthetic --out runs/base --attention none   # no attention
  attnkit translate train --data ../shared/data/eng-fra --out runs/fr --arch transformer \\
      --max-minutes 30
  attnkit translate train --resume runs/fr                         # continue an interrupted run
  attnkit translate eval --run runs/demo --data synthetic --beam 5 --json
  attnkit translate predict --run runs/demo "The cat does not see her." --plot cat.png
  echo "I will take these letters." | attnkit translate predict --run runs/demo

--data is "synthetic" (built-in grammar corpus), "tatoeba" (download), a folder with
train/valid/test .tsv[.gz] files, or one english<TAB>french pairs file (split 96/2/2).
"""

THREADS_HELP = ("CPU threads (default 1: fastest for these small models, above all on a "
                "shared CPU; 0 = torch's default)")
ATTENTION = ["additive", "bahdanau", "dot", "scaled_dot", "general", "concat", "local-m",
             "local-p", "none"]


def _sub(sub, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "translate", help="English -> French translation with attention (RNN or Transformer)",
        description="Train, evaluate and run attention translation models; plot alignments.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    t = _sub(sub, "train", "train a run folder, then score its test split")
    t.add_argument("--data", default="synthetic", help="synthetic | tatoeba | PATH "
                   "(default synthetic)")
    t.add_argument("--out", help="run folder to create (default runs/demo)")
    t.add_argument("--arch", choices=["rnn", "transformer"], default="rnn")
    t.add_argument("--attention", choices=ATTENTION, default="additive",
                   help="RNN score (default additive); none = fixed-length context baseline")
    t.add_argument("--cell", choices=["gru", "lstm"], default="gru")
    t.add_argument("--style", choices=["bahdanau", "luong"], default="bahdanau")
    t.add_argument("--hidden", type=int, help="RNN hidden size (default 128)")
    t.add_argument("--emb-dim", type=int, help="RNN embedding size (default 64)")
    t.add_argument("--layers", type=int, help="RNN or Transformer layers")
    t.add_argument("--window", type=int, help="local attention half-width D (default 5)")
    t.add_argument("--d-model", type=int, help="Transformer width (default 128)")
    t.add_argument("--heads", type=int, help="Transformer heads (default 4)")
    t.add_argument("--dropout", type=float)
    t.add_argument("--teacher-forcing", type=float, metavar="RATIO",
                   help="probability of feeding the gold token (RNN; default 1.0)")
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--train-size", type=int, help="synthetic training pairs (default 20000)")
    t.add_argument("--max-len", type=int, default=30, help="longest training sentence (tokens)")
    t.add_argument("--min-freq", type=int, default=1,
                   help="keep words seen this often in training (default 1)")
    t.add_argument("--max-vocab", type=int, default=30000,
                   help="largest vocabulary per language, specials included (default 30000)")
    t.add_argument("--subword", type=int, metavar="N",
                   help="joint English+French sentencepiece vocabulary of about N pieces, "
                   "trained on the training text and saved in the run (default: words)")
    t.add_argument("--ff-dim", type=int, help="Transformer feed-forward size (default 256)")
    add_train_options(
        t, max_minutes_default=-1.0,
        epochs="default 8 (early stopping on validation BLEU)", batch_size="default 64",
        lr="default 3e-3 (rnn), 1e-3 (transformer)",
        max_minutes="training budget in minutes (default 2; 0 = unlimited)")
    t.add_argument("--batch-tokens", type=int, metavar="N",
                   help="also cap each batch at N padded tokens (per side)")
    t.add_argument("--schedule", choices=["constant", "linear", "cosine", "inverse_sqrt"],
                   help="learning-rate schedule; linear/cosine reach 0 at the end of --epochs "
                   "(default constant for rnn, inverse_sqrt for transformer)")
    t.add_argument("--warmup", type=int, metavar="STEPS",
                   help="warm-up steps (default 0 rnn, 300 transformer)")
    t.add_argument("--amp", action="store_true",
                   help="bfloat16 autocast (GPU, or a CPU with AVX512-BF16/AMX)")
    t.add_argument("--eval-every", type=int, metavar="STEPS",
                   help="validate every STEPS steps (default once per epoch and at the stop)")
    t.add_argument("--threads", type=int, default=1, help=THREADS_HELP)
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=run_train)

    e = _sub(sub, "eval", "BLEU/chrF of a run (free-running decoding, multi-reference)")
    e.add_argument("--run", required=True, metavar="RUN_DIR")
    e.add_argument("--data", help="synthetic | tatoeba | PATH (default: the run's test split)")
    e.add_argument("--beam", type=int, default=1, help="beam size (default 1 = greedy)")
    e.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty (beam > 1)")
    e.add_argument("--no-unk-replace", action="store_true",
                   help="keep <unk> instead of copying the most attended source word")
    e.add_argument("--report", metavar="HTML", help="also write examples + heatmaps here")
    e.add_argument("--device", default="cpu")
    e.add_argument("--threads", type=int, default=1, help=THREADS_HELP)
    e.add_argument("--json", action="store_true",
                   help="print one JSON object of metrics as the last line")
    e.set_defaults(func=run_eval)

    p = _sub(sub, "predict", "translate sentences (arguments, or stdin lines)")
    p.add_argument("--run", required=True, metavar="RUN_DIR")
    p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                   help="sentences to translate; none = read one per line from stdin")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--plot", metavar="FILE", help="save the heatmap of the (first) sentence; "
                   "with several sentences FILE gets -2, -3 ... before its extension")
    p.add_argument("--no-unk-replace", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help=THREADS_HELP)
    p.add_argument("--json", action="store_true", help="one JSON object per sentence")
    p.set_defaults(func=run_predict)
    return parser


def run_train(args) -> int:
    from attnkit.apps.translate import train

    model = {k: v for k, v in {
        "hidden": args.hidden, "emb_dim": args.emb_dim, "layers": args.layers,
        "window": args.window, "d_model": args.d_model, "heads": args.heads,
        "ff_dim": args.ff_dim,
        "dropout": args.dropout, "teacher_forcing_ratio": args.teacher_forcing}.items()
        if v is not None}
    max_minutes = None if args.max_minutes == 0 else args.max_minutes
    train(args.data, args.out or "runs/demo", arch=args.arch, attention=args.attention,
          cell=args.cell, style=args.style, model=model, epochs=args.epochs,
          batch_size=args.batch_size, lr=args.lr, seed=args.seed, device=args.device,
          max_minutes=max_minutes, resume=args.resume, label_smoothing=args.label_smoothing,
          max_len=args.max_len, min_freq=args.min_freq, max_vocab=args.max_vocab,
          train_size=args.train_size, subword=args.subword, batch_tokens=args.batch_tokens,
          schedule=args.schedule, warmup=args.warmup, eval_every=args.eval_every, amp=args.amp,
          threads=args.threads or None, progress=not args.no_progress)
    return 0


def run_eval(args) -> int:
    from attnkit.apps.translate import evaluate, format_table, set_threads

    set_threads(args.threads)
    metrics = evaluate(args.run, args.data, beam=args.beam, alpha=args.alpha,
                       device=args.device, unk_replace=not args.no_unk_replace,
                       report=args.report)
    print(format_table(metrics))
    if args.report:
        print(f"report: {args.report}")
    if args.json:
        print(json.dumps({k: metrics[k] for k in ("bleu", "chrf", "counts", "sentences",
                                                  "references", "beam", "by_length",
                                                  "signature", "single_ref",
                                                  "sentences_per_s")
                          if k in metrics}))
    return 0


def _plot_path(base: str, i: int) -> str:
    if i == 0:
        return base
    stem, dot, ext = base.rpartition(".")
    return f"{stem}-{i + 1}.{ext}" if dot else f"{base}-{i + 1}"


def run_predict(args) -> int:
    from attnkit.apps.translate import Translator, set_threads, write_heatmap
    from attnkit.errors import DataError

    set_threads(args.threads)
    sentences = list(args.sentences)
    if not sentences:
        if sys.stdin.isatty():
            print("type sentences, one per line (Ctrl-D to end)", file=sys.stderr)
        sentences = [line.rstrip("\n") for line in sys.stdin]
        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            raise DataError("no sentence given: pass one as an argument or on stdin")
    translator = Translator.load(args.run, device=args.device)
    outs = translator.translate(sentences, beam=args.beam, alpha=args.alpha,
                                unk_replace=not args.no_unk_replace)
    for i, t in enumerate(outs):
        if args.json:
            print(json.dumps({"source": t.source, "translation": t.text, "tokens": t.tokens,
                              "source_tokens": t.source_tokens, "score": t.score,
                              "attention": None if t.attention is None
                              else t.attention.round(4).tolist()}, ensure_ascii=False))
        else:
            print(t.text)
        if args.plot:
            path = write_heatmap(t, _plot_path(args.plot, i), title=t.source)
            print(f"heatmap: {path}", file=sys.stderr)
    return 0
