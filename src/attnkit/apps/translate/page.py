"""The translate app's HTML pages: `predictions_page` turns `TranslationPrediction` s into
`attnkit.viz.translation_page` examples (every layer and head of a Transformer when the
predictions carry ``layer_weights``, else ``[T_tgt, T_src]``), with a scored run's references
and metrics for ``eval --report`` and a run's ``report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.bleu import bleu_chrf
from attnkit.errors import UsageError
from attnkit.explain.trust import best_shown, docs_measured, shown_order

AER = ("AER (alignment error rate: the share of word links that disagree with people's; 0 is "
       "perfect) ↓")
# No run measures its page's methods itself (`translate align --gold` scores its aligner, which
# the page does not show): the page cites docs/results.md's AER of a Transformer's methods.
MEASURED = docs_measured("translate", AER, lower=True, margin=2.0, min_count=30)
UNMEASURED = docs_measured("translate rnn", AER)   # an RNN run: nothing measured on one


def translate_trust(model_config: Any) -> str:
    """How far the page may trust attention on a run of this model (a Transformer: `MEASURED`;
    an RNN: nothing measured), and which method to add instead."""
    from attnkit.models.config import TransformerConfig

    return best_shown(["attention"], MEASURED if isinstance(model_config, TransformerConfig)
                      else UNMEASURED, add="--explain")


def note_trust(predictions: Sequence[TranslationPrediction], model_config: Any) -> None:
    """Give each prediction (and each of its sentences) `translate_trust`'s sentence."""
    why = translate_trust(model_config)
    for whole in predictions:
        for p in (whole, *(whole.sentences or ())):
            p.why = why


# A TranslationPrediction (attnkit.apps.translate.prediction), which imports this module for
# its page: the name alone keeps the two files free of an import cycle.
TranslationPrediction = Any


def predictions_page(predictions: Sequence[TranslationPrediction], summary: dict[str, Any], *,
                     references: Sequence[Sequence[str]] | None = None,
                     metrics: dict[str, Any] | None = None) -> str:
    """The translation explorer of ``predictions`` (a scored run's report with ``references`` and
    ``metrics``): several sentences of one input in order, opening on the method asked first,
    else on attention with ``why``. A prediction without weights or output is left out;
    UsageError when none is left.
    """
    from attnkit.viz import TranslationExample, translation_page

    refs = references if references is not None else [()] * len(predictions)
    examples = []
    for whole, r in zip(predictions, refs, strict=True):
        parts = whole.sentences or [whole]
        for k, p in enumerate(parts):
            if p.weights is None or not p.tokens:
                continue
            last, warning = k == len(parts) - 1, p.warning()
            scores: dict[str, Any] = {"log-probability": round(p.score, 3)}
            if warning:
                scores["warning"] = warning
            elif p.unknown_words:
                scores["source words unknown to the run"] = p.unknown_line()
            if p.truncated:
                scores["source tokens cut off"] = p.truncated
            if r and last:
                scores["chrF"] = round(bleu_chrf([whole.text], [r])["chrf"], 1)
            if len(parts) > 1:
                scores["sentence"] = f"{k + 1} of {len(parts)}"
            words = p.words()   # whole words: subword pieces joined, their attention gathered
            examples.append(TranslationExample(
                words.source, words.target, words.matrix(
                    p.layer_weights if p.layer_weights is not None else p.weights),
                references=list(r if last else ()), scores=scores,
                methods={m: words.matrix(v) for m, v in (p.explanations or {}).items()},
                links=sorted({(words.src_owner[q][0], words.tgt_owner[t][0])
                              for q, t in p.piece_links or ()})))
    if not examples:
        raise UsageError("nothing to show on the page: no translation with attention weights "
                         "(a model without attention, or empty outputs)")
    first = predictions[0]
    carried = (first.sentences or [first])[0].explanations
    asked = [first.shown, *carried] if carried else []
    run = Path(str(summary.get("run", "run"))).name
    return translation_page(examples, summary, title=f"attnkit translate: {run}",
                            metrics=None if metrics is None else page_metrics(metrics),
                            order=shown_order(asked), note=first.why)


def page_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The run-level figures the page shows: BLEU/chrF, decoding, BLEU by source length."""
    shown: dict[str, Any] = {"BLEU": f"{metrics['bleu']:.2f}", "chrF": f"{metrics['chrf']:.2f}",
                             "sentences": metrics["sentences"], "beam": metrics["beam"]}
    single = metrics.get("single_ref")
    if single:
        shown["BLEU, one reference per line"] = f"{single['bleu']:.2f} ({single['lines']} lines)"
    for row in metrics.get("by_length", []):
        shown[f"BLEU, sources of {row['lengths']} words"] = f"{row['bleu']:.2f} ({row['n']})"
    if metrics.get("signature"):
        shown["sacrebleu"] = metrics["signature"]
    return shown
