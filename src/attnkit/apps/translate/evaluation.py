"""Scoring a translation run: sacrebleu corpus BLEU (cased, 13a) and chrF of free-running
decoding, by any engine.

Adjacent lines with the same English sentence are the references of one source
(multi-reference BLEU); ``single_ref`` scores each line alone, the usual one-reference-per-line
test-set BLEU (`attnkit.apps.translate.metrics`).

Example:
    ```python
    result = evaluation(loaded, None, report=10, beam=5)
    result.metrics["bleu"], result.page is not None
    ```
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from attnkit.apps.base import Evaluation, Loaded, Log, quiet
from attnkit.apps.translate.metrics import score_translations
from attnkit.apps.translate.page import report_page
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.data.pairs import group_references
from attnkit.data.translation_splits import Pair, eval_pairs
from attnkit.errors import DataError, UsageError

DEFAULT_EXAMPLES = 10


def score_pairs(translate: Callable[[Sequence[str]], list[TranslationPrediction]],
                pairs: Sequence[Pair], *, beam: int, alpha: float, engine: str,
                max_source: int,
                ) -> tuple[dict[str, Any], list[TranslationPrediction], list[list[str]]]:
    """Metrics, predictions and references of ``pairs`` (each distinct source decoded once,
    by ``translate``: sentences -> predictions)."""
    groups = group_references(list(pairs))
    if not groups:
        raise DataError("nothing to evaluate: no sentence pairs")
    sources, refs = [en for en, _ in groups], [r for _, r in groups]
    start = time.perf_counter()
    preds = translate(sources)
    seconds = time.perf_counter() - start
    metrics = score_translations([p.text for p in preds], sources, refs)
    metrics.update({"sentences": len(groups), "references": sum(len(r) for r in refs),
                    "beam": beam, "alpha": alpha if beam > 1 else None,
                    "decode_seconds": round(seconds, 2),
                    "sentences_per_s": round(len(groups) / max(seconds, 1e-9), 1),
                    "engine": engine, "max_source_tokens": max_source,
                    "truncated": sum(1 for p in preds if p.truncated),
                    "unknown": round(sum(p.unknown for p in preds) / len(preds), 4)})
    return metrics, preds, refs


def evaluation(loaded: Loaded, data: str | None, *, report: int = 0, beam: int = 1,
               alpha: float = 0.6, unk_replace: bool = True, batch_size: int | None = None,
               strict: bool = False, log: Log = quiet) -> Evaluation:
    """BLEU/chrF of a loaded run on ``data`` (None: the run's own test split).

    Args:
        loaded: a translate run (either engine).
        data: see `attnkit.data.translation_splits.eval_pairs`.
        report: the number of examples on the report page (0: no page; -1: the default, 10);
            they are decoded again with every layer's and head's attention.
        beam, alpha: beam size (1 = greedy) and length penalty (attnkit: GNMT; CTranslate2:
            ``length ** alpha``).
        unk_replace: replace an output ``<unk>`` by the most attended source token (attnkit).
        batch_size: at most this many sentences per batch (None: the engine's default).
        strict: a malformed data line is an error; log: where notes on skipped lines go.

    Returns:
        `Evaluation` with ``{"bleu", "chrf", "counts", "signature", "by_length",
        "single_ref", "sentences", "references", "beam", "alpha", "decode_seconds",
        "sentences_per_s", "engine", "max_source_tokens", "truncated", "unknown"}`` (and the
        export's ``"quantization"`` for CTranslate2).

    Raises:
        UsageError: a report for a model without attention or for the CTranslate2 engine.
    """
    engine = loaded.engine
    if report and not engine.has_attention:
        raise UsageError(engine.no_attention)
    pairs = eval_pairs(data, loaded.config["data"], strict=strict, log=log)

    def translate(sentences: Sequence[str]) -> list[TranslationPrediction]:
        return engine.translate(sentences, beam=beam, alpha=alpha, unk_replace=unk_replace,
                                batch_size=batch_size)

    metrics, preds, refs = score_pairs(translate, pairs, beam=beam, alpha=alpha,
                                       engine=engine.name,
                                       max_source=engine.pipeline.max_source)
    if "quantization" in loaded.config:
        metrics["quantization"] = loaded.config["quantization"]
    page = None
    if report:
        n = DEFAULT_EXAMPLES if report < 0 else report
        shown = engine.translate([p.source for p in preds[:n]], beam=beam, alpha=alpha,
                                 unk_replace=unk_replace, attention="all")
        page = report_page(metrics, shown, refs[:n], loaded.summary())
    return Evaluation(metrics, page)
