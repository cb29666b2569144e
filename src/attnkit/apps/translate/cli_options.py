"""The translate app's own command-line options, examples and extra commands (``export``),
declared as data: ``attnkit.cli`` builds the parser from them.

Example:
    ```python
    [o.flag for o in OPTIONS if "predict" in o.commands]   # ['--beam', '--alpha', ...]
    ```
"""

from __future__ import annotations

from typing import Any

from attnkit.apps.options import Command, Option
from attnkit.apps.translate.alignment.command import ALIGN_COMMANDS

EXAMPLES = (
    "attnkit translate train --data synthetic --out runs/demo        # ~3 min on 2 CPU cores",
    "attnkit translate train --data synthetic --out runs/luong --attention general --style luong",
    "attnkit translate train --data synthetic --out runs/base --attention none   # no attention",
    "attnkit translate train --data ../shared/data/eng-fra --out runs/fr --arch transformer "
    "--max-minutes 30",
    "attnkit translate train --resume runs/fr --max-minutes 60        # continue an interrupted "
    "run",
    "attnkit translate eval --run runs/demo --data synthetic --beam 5 --json",
    'attnkit translate predict --run runs/demo "The cat does not see her." --plot cat.png',
    'attnkit translate predict --run runs/demo "I am cold." --html cold.html   # every layer/head',
    'echo "I will take these letters." | attnkit translate predict --run runs/demo --json',
    "attnkit translate export runs/fr runs/fr-ct2 --quantization int8   # CTranslate2 (a "
    "Transformer trained with --subword; pip install 'attnkit[serve]')",
    "attnkit translate eval --run runs/fr-ct2 --engine ctranslate2 --beam 5 --json",
    "",
    "--data is \"synthetic\" (built-in grammar corpus), \"tatoeba\" (download), a folder with",
    "train/valid/test .tsv[.gz] files, or one english<TAB>french pairs file (split 96/2/2).",
)

_SIZES = (
    ("--hidden", "RNN hidden size (default 128)"),
    ("--emb-dim", "RNN embedding size (default 64)"),
    ("--layers", "RNN or Transformer layers (default 1 rnn, 2 transformer)"),
    ("--window", "local attention half-width D (default 5)"),
    ("--d-model", "Transformer width (default 128)"),
    ("--heads", "Transformer heads (default 4)"),
    ("--ff-dim", "Transformer feed-forward size (default 256)"),
    ("--train-size", "synthetic training pairs (default 20000)"),
    ("--max-len", "drop training pairs longer than this many tokens (default 30)"),
    ("--min-freq", "keep words seen this often in training (default 1)"),
    ("--max-vocab", "largest vocabulary per language, specials included (default 30000)"),
    ("--subword", "joint English+French sentencepiece vocabulary of about N pieces, trained "
     "on the training text and saved in the run (default: words)"),
    ("--batch-tokens", "also cap each batch at N padded tokens (per side)"),
    ("--warmup", "warm-up steps (default 0 rnn, 300 transformer)"),
    ("--eval-every", "validate every N steps (default once per epoch and at the stop)"),
    ("--valid-sample", "validation sentences decoded for model selection (default 300)"),
    ("--examples", "test examples printed and put in report.html (default 10)"),
)
_RATES = (
    ("--dropout", "dropout (default 0.1)"),
    ("--teacher-forcing", "probability of feeding the gold token (RNN; default 1.0)"),
    ("--label-smoothing", "label smoothing of the loss (default 0)"),
)
_CHOICES = (
    ("--arch", ("rnn", "transformer"), "model (default rnn)"),
    ("--attention", ("additive", "bahdanau", "dot", "scaled_dot", "general", "concat",
                     "local-m", "local-p", "none"),
     "RNN score (default additive); none = fixed-length context baseline"),
    ("--cell", ("gru", "lstm"), "RNN cell (default gru)"),
    ("--style", ("bahdanau", "luong"), "RNN decoder style (default bahdanau)"),
    ("--schedule", ("constant", "linear", "cosine", "inverse_sqrt"),
     "learning-rate schedule; linear/cosine reach 0 at the end of --epochs (default constant "
     "for rnn, inverse_sqrt for transformer)"),
)
_DECODING = (
    Option("--beam", int, "beam size (default 1 = greedy)", ("eval", "predict"), default=1),
    Option("--alpha", float, "length penalty (beam > 1; GNMT for attnkit, length ** alpha for "
           "CTranslate2; default 0.6)", ("eval", "predict"), default=0.6),
    Option("--no-unk-replace", None, "keep <unk> instead of copying the most attended source "
           "word", ("eval", "predict"), dest="unk_replace", const=False),
    Option("--engine", str, "attnkit (default) or ctranslate2: then --run is a folder written "
           "by `attnkit translate export` (no attention: no --html/--plot/--report, <unk> "
           "kept)", ("eval", "predict"), choices=("attnkit", "ctranslate2"), stage="load"),
    Option("--strict", None, "a malformed data line is an error (default: skipped and "
           "counted)", ("train", "eval")),
    Option("--examples", int, "translations shown on the --report page (default 10)",
           ("eval",), metavar="N"),
    Option("--explain", str, "explanations beside attention: rollout, grad-input, "
           "integrated-gradients (comma-separated, or all; the first is what --plot draws; the "
           "page offers them all; gradients need pip install 'attnkit[explain]')",
           ("predict",), metavar="METHOD"),
    Option("--alignments", None, "add word links between each input and its translation "
           "(JSON \"alignment\", outlined on the --html page)", ("predict",)),
)
OPTIONS = (
    *(Option(flag, choices=choices, help=text, type=str) for flag, choices, text in _CHOICES),
    *(Option(flag, int, text, metavar="N") for flag, text in _SIZES),
    *(Option(flag, float, text) for flag, text in _RATES),
    *_DECODING,
)


def _export(values: dict[str, Any]) -> int:
    from attnkit.apps.translate import export_run

    out = export_run(values["run"], values["out"], quantization=values["quantization"])
    print(f"exported: {out} (CTranslate2, {values['quantization']}); use it with "
          f"--engine ctranslate2 --run {out}")
    return 0


COMMANDS = (
    *ALIGN_COMMANDS,
    Command("export", "export a Transformer run (trained with --subword) to a self-contained "
            "CTranslate2 folder", (
                Option("run", str, "the translate run folder", metavar="RUN"),
                Option("out", str, "the folder to create (new or empty)", metavar="OUT"),
                Option("--quantization", str, "stored weight type: int8 (default), "
                       "int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16 "
                       "or float32", default="int8")),
            _export),
)
