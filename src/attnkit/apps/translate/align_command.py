"""``attnkit translate align`` and ``align-train`` (`ALIGN_COMMANDS`), declared as data (the
CLI builds their parsers) with the functions they run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from attnkit.apps.presentation import Command
from attnkit.errors import UsageError
from attnkit.fileio import read_lines
from attnkit.settings import Option
from attnkit.training.signals import interruptible

_KINDS = ("eflomal", "attention", "head", "grad-input", "integrated-gradients")


def _position(value: str | None, flag: str) -> int | str | None:
    """``--layer 2`` -> 1 (0-based), ``avg`` -> ``"avg"``."""
    if value is None or value == "avg":
        return value
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"{flag} must be a number from 1 or avg, got {value!r}")
    return int(value) - 1


def method_from(values: dict[str, Any]):
    """The `Method` the options name (None: the run's default)."""
    from attnkit.alignment.aligner import Method

    kind = values.get("method")
    layer, head = _position(values.get("layer"), "--layer"), _position(values.get("head"), "--head")
    if kind is None and layer is None and head is None and values.get("shift") is None:
        return None
    if kind not in (None, "attention") and (layer is not None or head is not None):
        raise UsageError("--layer and --head choose attention: use them with --method "
                         "attention")
    return Method(kind or "attention", "avg" if layer is None else layer,
                  "avg" if head is None else head, bool(values.get("shift")))


# SIGTERM as Ctrl-C: unwinds, so that eflomal's files in the temporary folder go with it
# (killed outright, they would stay).
@interruptible()
def _align(values: dict[str, Any]) -> int:
    from attnkit.alignment.aligner import check_pairs, unknown_shares
    from attnkit.alignment.links import alignment_scores, format_pharaoh, read_gold
    from attnkit.apps.outputs import ALIGNMENTS, output_file, write_output
    from attnkit.apps.translate import load_run
    from attnkit.apps.translate.alignment import align_pairs
    from attnkit.apps.translate.prediction import UNKNOWN_WARNING

    out = output_file(values["out"], ALIGNMENTS) if values.get("out") else None
    sources, targets = check_pairs(read_lines(values["source"], "source file"),
                                   read_lines(values["target"], "target file"),
                                   names=(f"the source file {values['source']}",
                                          f"the target file {values['target']}"))
    gold = read_gold(values["gold"], [len(s) for s in sources], [len(t) for t in targets]
                     ) if values.get("gold") else None
    loaded = load_run(values["run"], device=values.get("device") or "cpu")
    normalize = values.get("normalize", True) is not False
    result = align_pairs(
        loaded, sources, targets, method=method_from(values),
        extraction=values.get("extraction"), threshold=values.get("threshold"),
        symmetrize=values.get("symmetrize"), adapt=values.get("adapt"),
        adapt_minutes=values.get("adapt_minutes") or 10.0, adapt_data=values.get("adapt_data"),
        normalize=normalize)
    for note in result.notes:
        print(f"attnkit: note: {note}", file=sys.stderr)
    # After aligning, so that a refused setting stays one error line. eflomal does not read
    # the model, so the model's vocabulary does not bound it.
    src, tgt = unknown_shares(loaded.pipeline, sources, targets, normalize=normalize)
    if max(src, tgt) > UNKNOWN_WARNING and not result.method.startswith("eflomal"):
        print(f"attnkit: warning: {src:.0%} of the source words and {tgt:.0%} of the target "
              f"words are unknown to the run (more than {UNKNOWN_WARNING:.0%}): it cannot read "
              "these pairs and its links are little better than guesses; align with a run "
              "trained on text like them", file=sys.stderr)
    lines = "".join(format_pharaoh(links) + "\n" for links in result.links)
    if out is not None:
        write_output(out, ALIGNMENTS, lines)
        print(f"wrote {out} ({len(result.links)} pairs; {result.method})", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    if gold is not None:
        scores = alignment_scores(result.links, gold)
        line = (json.dumps({**scores, "pairs": len(gold), "method": result.method})
                if values.get("json") else
                f"precision {scores['precision']:.1f}  recall {scores['recall']:.1f}  AER "
                f"{scores['aer']:.1f}  ({len(gold)} pairs, {scores['links']} links; "
                f"{result.method})")
        print(line, file=sys.stdout if out is not None else sys.stderr)
    return 0


@interruptible()   # as `_align`: eflomal's temporary files go on a signal
def _align_train(values: dict[str, Any]) -> int:
    from attnkit.apps.translate.alignment import train_aligner

    folder = train_aligner(values["run"], data=values.get("data"), pairs=values["pairs"],
                           minutes=values["max_minutes"], layer=values["layer"],
                           seed=values["seed"])
    print(f"wrote {folder}: the run's trained aligner; `attnkit translate align --run "
          f"{values['run']}` now uses it")
    return 0


ALIGN = Command(
    "align", "word alignments (Pharaoh i-j lines) of given sentence pairs: eflomal's, or the "
    "run's by forced decoding",
    (Option("--run", str, "the translate run folder", metavar="RUN", required=True),
     Option("--source", str, "source (English) sentences, one per line, whitespace tokens",
            metavar="FILE", required=True),
     Option("--target", str, "their target (French) sentences, line by line", metavar="FILE",
            required=True),
     Option("--out", str, "write the links here (.txt/.wa/.align/.pharaoh; default stdout)",
            metavar="FILE"),
     Option("--gold", str, "gold links (k e f S|P, 1-based): print precision, recall, AER",
            metavar="FILE"),
     Option("--json", None, "print the scores of --gold as one JSON line"),
     Option("--method", str, "what links come from (default: eflomal, the classical aligner, "
            "fitted on the pairs and the run's training pairs; without eflomal installed, "
            "the run's trained aligner, else attention)", choices=_KINDS),
     Option("--layer", str, "attention layer, 1 = first (default avg)", metavar="N|avg"),
     Option("--head", str, "attention head, 1 = first (default avg)", metavar="N|avg"),
     Option("--shift", None, "read attention at the step that reads a target word (it has seen "
            "it; shift-attention, Chen et al. 2020), not at the one that predicts it"),
     Option("--extraction", str, "argmax per word, or every weight >= --threshold (default: "
            "the run's)", choices=("argmax", "threshold")),
     Option("--threshold", float, "least weight linked with --extraction threshold"),
     Option("--symmetrize", str, "combine both directions (default: the run's)",
            choices=("none", "intersection", "union", "grow-diag-final-and")),
     Option("--adapt", None, "fit the trained aligner to the pairs first (the default on a "
            "run with one)", dest="adapt", const=True),
     Option("--no-adapt", None, "align with the aligner as trained", dest="adapt",
            const=False),
     Option("--adapt-minutes", float, "the adaptation's budget (default 10)", metavar="M"),
     Option("--adapt-data", str, "raw pairs eflomal learns from besides the pairs (default: "
            "the run's data)", metavar="DATA"),
     Option("--no-normalize", None, "feed the tokens as they are, not as the model's training "
            "text", dest="normalize", const=False)),
    _align,
    ("attnkit translate align --run runs/fr --source test.e --target test.f --out test.wa",
     "attnkit translate align --run runs/fr --source trial.e --target trial.f --gold trial.wa",
     "attnkit translate align --run runs/fr --source a.en --target a.fr --method attention "
     "--layer 2 --head avg --symmetrize grow-diag-final-and"), runtime=True)
ALIGN_TRAIN = Command(
    "align-train", "train the run's aligner (a head on eflomal's links; the model is unchanged)",
    (Option("--run", str, "the translate run (a Transformer)", metavar="RUN", required=True),
     Option("--data", str, "raw training pairs (default: the run's data)", metavar="DATA"),
     Option("--pairs", int, "labelled pairs the head learns from (default 20000)",
            default=20000, metavar="N"),
     Option("--max-minutes", float, "budget, eflomal included (default 2)", default=2.0,
            metavar="M"),
     Option("--layer", int, "decoder layer whose states the head reads, 1 = first (default: "
            "the last)", default=None, metavar="N"),
     Option("--seed", int, "which pairs, and the batch order (default 0)", default=0)),
    _align_train, ("attnkit translate align-train --run runs/fr --max-minutes 2",),
    runtime=True)
ALIGN_COMMANDS = (ALIGN, ALIGN_TRAIN)
