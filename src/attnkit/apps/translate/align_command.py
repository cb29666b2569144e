"""``attnkit translate align`` (`ALIGN_COMMANDS`), declared as data (the CLI builds its
parser) with the function it runs.
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

_KINDS = ("eflomal", "attention", "grad-input", "integrated-gradients")


def _position(value: str | None, flag: str) -> int | str | None:
    """``--layer 2`` -> 1 (0-based), ``avg`` -> ``"avg"``."""
    if value is None or value == "avg":
        return value
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"{flag} must be a number from 1 or avg, got {value!r}")
    return int(value) - 1


def method_from(values: dict[str, Any]):
    """The `Method` the options name (None: the run's default; ``--method attention`` alone:
    the run's own read of its attention, `_align`'s ``model_only``)."""
    from attnkit.alignment.aligner import Method

    kind = values.get("method")
    layer, head = _position(values.get("layer"), "--layer"), _position(values.get("head"), "--head")
    if kind in (None, "attention") and layer is None and head is None and values.get(
            "shift") is None:
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
        symmetrize=values.get("symmetrize"), eflomal_data=values.get("eflomal_data"),
        normalize=normalize, model_only=values.get("method") == "attention")
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
            "the run's attention); attention alone reads the run's attention as its page "
            "does (an --align-loss run: its trained head)", choices=_KINDS),
     Option("--layer", str, "attention layer, 1 = first (default avg)", metavar="N|avg"),
     Option("--head", str, "attention head, 1 = first (default avg)", metavar="N|avg"),
     Option("--shift", None, "read attention at the step that reads a target word (it has seen "
            "it; shift-attention, Chen et al. 2020), not at the one that predicts it"),
     Option("--extraction", str, "argmax per word, or every weight >= --threshold (default: "
            "the run's)", choices=("argmax", "threshold")),
     Option("--threshold", float, "least weight linked with --extraction threshold"),
     Option("--symmetrize", str, "combine both directions (default: the run's)",
            choices=("none", "intersection", "union", "grow-diag-final-and")),
     Option("--eflomal-data", str, "raw pairs eflomal learns from besides the pairs (default: "
            "the run's data)", metavar="DATA"),
     Option("--no-normalize", None, "feed the tokens as they are, not as the model's training "
            "text", dest="normalize", const=False)),
    _align,
    ("attnkit translate align --run runs/fr --source test.e --target test.f --out test.wa",
     "attnkit translate align --run runs/fr --source trial.e --target trial.f --gold trial.wa",
     "attnkit translate align --run runs/fr --source a.en --target a.fr --method attention "
     "--layer 2 --head avg --symmetrize grow-diag-final-and"), runtime=True)
ALIGN_COMMANDS = (ALIGN,)
