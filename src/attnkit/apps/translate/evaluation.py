"""Scoring a translation run: sacrebleu corpus BLEU (cased, 13a) and chrF of free-running
decoding, by any engine (adjacent lines with one English sentence are the references of one
source); `format_table` is what ``eval`` prints.
"""

from __future__ import annotations

import time
from typing import Any

from attnkit.apps.results import Evaluation, Log, quiet
from attnkit.apps.translate.engines import TranslateLoaded, translate_texts, unk_note
from attnkit.apps.translate.page import note_trust, predictions_page
from attnkit.apps.translate.prediction import most_reordered
from attnkit.apps.translate.settings import TranslateSettings
from attnkit.bleu import translation_scores
from attnkit.data.pairs import group_references
from attnkit.data.text_codec import SRC_LANG, word_count
from attnkit.data.translation_splits import NAMED, eval_pairs, load_splits
from attnkit.errors import DataError, UsageError


def evaluation(loaded: TranslateLoaded, data: str | None, *, report: int = 0, beam: int = 1,
               alpha: float = 0.6, unk_replace: bool = True, batch_size: int | None = None,
               strict: bool = False, split: bool = True, log: Log = quiet) -> Evaluation:
    """BLEU/chrF of a loaded run on ``data`` (None: the run's own test split;
    `attnkit.data.translation_splits.eval_pairs`), with ``report`` examples (-1: the default)
    on the report page, decoded again with every layer's and head's attention. ``beam``,
    ``alpha``, ``unk_replace``, ``batch_size``: as `TranslateApp.predictions`; ``strict``: a
    malformed line is an error (else a note on ``log``); ``split``: cut each source of a raw
    ``data`` file or folder into sentences (named corpora are read as they are). UsageError: a
    report for a model without attention or for the CTranslate2 engine.
    """
    engine = loaded.engine
    if report and not engine.has_attention:
        raise UsageError(engine.no_attention)
    unk_note(engine, unk_replace)   # after the refusal of a report: one line
    groups = group_references(eval_pairs(data, loaded.config["data"], strict=strict, log=log))
    if not groups:
        raise DataError("nothing to evaluate: no sentence pairs")
    sources, refs = [en for en, _ in groups], [r for _, r in groups]   # each source once
    split = split and data not in (None, loaded.config["data"].get("kind"), *NAMED)
    decoding = {"split": split, "beam": beam, "alpha": alpha, "unk_replace": unk_replace}
    start = time.perf_counter()
    preds = translate_texts(engine, sources, batch_size=batch_size, **decoding)
    seconds = time.perf_counter() - start
    # Lengths in words (not subword pieces), so runs with different tokenizers compare.
    metrics = translation_scores([p.text for p in preds], refs,
                                 [word_count(s, SRC_LANG) for s in sources])
    metrics.update({"sentences": len(groups), "references": sum(len(r) for r in refs),
                    "beam": beam, "alpha": alpha if beam > 1 else None,
                    "unk_replace": unk_replace,
                    "decode_seconds": round(seconds, 2),
                    "sentences_per_s": round(len(groups) / max(seconds, 1e-9), 1),
                    "engine": engine.name, "max_source_tokens": engine.pipeline.max_source,
                    "truncated": sum(1 for p in preds if p.truncated),
                    "unknown": round(sum(p.unknown for p in preds) / len(preds), 4)})
    if "quantization" in loaded.config:
        metrics["quantization"] = loaded.config["quantization"]
    n = TranslateSettings.examples if report < 0 else report
    page = _report(loaded, [p.source for p in preds[:n]], refs[:n], metrics,
                   **decoding) if report else None
    return Evaluation(metrics, page)


def _report(loaded: TranslateLoaded, sources: list[str], refs: list[list[str]],
            metrics: dict[str, Any], **decoding: Any) -> str:
    """The report page: ``sources`` translated again with every layer's and head's attention."""
    shown = translate_texts(loaded.engine, sources, attention="all", **decoding)
    note_trust(shown, loaded.model.config)
    return predictions_page(shown, loaded.summary(), references=refs, metrics=metrics)


def format_table(metrics: dict[str, Any]) -> str:
    """The metrics as a small text table (for the CLI)."""
    lines = [f"BLEU  {metrics['bleu']:6.2f}   chrF  {metrics['chrf']:6.2f}   "
             f"sentences {metrics['sentences']}   references {metrics['references']}   "
             f"beam {metrics['beam']}   (multi-reference)"]
    single = metrics.get("single_ref")
    if single:
        lines.append(f"BLEU  {single['bleu']:6.2f}   chrF  {single['chrf']:6.2f}   "
                     f"lines {single['lines']}   (one reference per line)")
    if "sentences_per_s" in metrics:
        lines.append(f"decoding {metrics['sentences_per_s']} sentences/s "
                     f"({metrics['decode_seconds']} s, {metrics.get('engine', 'attnkit')})")
    if metrics.get("truncated"):
        lines.append(f"{metrics['truncated']} source sentence(s) longer than "
                     f"{metrics['max_source_tokens']} tokens were cut to that length")
    if metrics.get("unknown"):
        lines.append(f"{metrics['unknown']:.1%} of the source words are unknown to the run "
                     "(mean per sentence)")
    lines += [f"{metrics['signature']}", "",
              "source length  sentences    BLEU  |  lines  BLEU 1-ref"]
    for row in metrics["by_length"]:
        lines.append(f"{row['lengths']:>13}  {row['n']:>9}  {row['bleu']:6.2f}  |  "
                     f"{row.get('lines', ''):>5}  {row.get('bleu_single_ref', float('nan')):6.2f}")
    return "\n".join(lines)


def after_training(loaded: TranslateLoaded, metrics: dict[str, Any], log: Log) -> None:
    """The test lines, a few examples, the heatmap of the most re-ordered sentence and
    the run's explorer page (``report.html``)."""
    from attnkit.apps.outputs import PAGE, write_output

    log(f"test: BLEU {metrics['bleu']:.2f}  chrF {metrics['chrf']:.2f}  "
        f"({metrics['sentences']} sentences, greedy)")
    n = loaded.config.get("options", {}).get("examples", TranslateSettings.examples)
    groups = group_references(load_splits(loaded.config["data"], progress=False)["test"])
    sources, refs = [en for en, _ in groups[:100]], [r for _, r in groups[:100]]
    engine = loaded.engine
    # As `predict` translates them: a line of two sentences, one sentence at a time.
    preds = translate_texts(engine, sources, attention=engine.has_attention)
    for p, r in list(zip(preds, refs, strict=True))[:n]:
        log(f"  EN  {p.source}\n  OUT {p.text}\n  REF {r[0]}")
    if not engine.has_attention:
        log("no heatmap or report.html: this model has no attention (attention='none')")
        return
    plottable = [p for p in preds if p.weights is not None and p.tokens]
    if plottable:
        shown = most_reordered(plottable)
        shown.render(loaded.path / "heatmap.png", run=loaded.path)
        log(f"heatmap: {loaded.path / 'heatmap.png'} ({shown.source!r} -> {shown.text!r})")
    if not any(p.tokens for p in preds[:n]):
        log(f"no report.html: no example to show (--examples {n}, or empty translations)")
        return
    write_output(loaded.path / "report.html", PAGE, _report(loaded, sources[:n], refs[:n], metrics),
                 run=loaded.path)
    log(f"report: {loaded.path / 'report.html'}")
