"""Corpus BLEU and chrF: the one sacrebleu wrapper, for translation and captioning alike; and
the translation scores beyond them, by source length and one reference per line.

Scores use sacrebleu's defaults (cased, 13a, exponential smoothing), so the printed
signature is the standard one. Sentences with fewer references than the most have ``None``
in the missing streams (a repeated reference would count twice). Each distinct source is
scored against all its references; ``single_ref`` scores every line against its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sacrebleu

# Source lengths (words) of the by-length table.
LENGTH_BINS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, 30), (31, None))


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """sacrebleu's layout: stream ``k`` holds the ``k``-th reference of every sentence; ValueError
    for a sentence without any reference, or no sentences."""
    if not references:
        raise ValueError("no references given")
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"sentence {i} has no reference")
    width = max(len(r) for r in references)
    return [[r[k] if k < len(r) else None for r in references] for k in range(width)]


def bleu_chrf(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Corpus BLEU and chrF (0-100) of detokenized ``hypotheses`` against their references (any
    number each) -> ``{"bleu", "chrf", "counts": {matches, totals, precisions, bp, sys_len,
    ref_len}, "signature"}``."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    streams = reference_streams(references)
    bleu_metric = sacrebleu.BLEU()
    bleu = bleu_metric.corpus_score(list(hypotheses), streams)
    chrf = sacrebleu.CHRF().corpus_score(list(hypotheses), streams)
    # Rounded: sacrebleu's floats carry noise (100.00000000000004) that means nothing.
    return {"bleu": round(bleu.score, 4), "chrf": round(chrf.score, 4),
            "counts": {"matches": list(bleu.counts), "totals": list(bleu.totals),
                       "precisions": [round(p, 2) for p in bleu.precisions],
                       "bp": round(bleu.bp, 4), "sys_len": bleu.sys_len,
                       "ref_len": bleu.ref_len},
            "signature": str(bleu_metric.get_signature())}


def by_length_table(src_lengths: Sequence[int], hypotheses: Sequence[str],
                    references: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """BLEU per source-length bin (words): ``[{"lengths": "1-5", "n": ..., "bleu": ...}]``."""
    rows = []
    for lo, hi in LENGTH_BINS:
        idx = [i for i, n in enumerate(src_lengths) if n >= lo and (hi is None or n <= hi)]
        if not idx:
            continue
        score = bleu_chrf([hypotheses[i] for i in idx], [references[i] for i in idx])
        rows.append({"lengths": f"{lo}-{hi}" if hi else f"{lo}+", "n": len(idx),
                     "bleu": round(score["bleu"], 2)})
    return rows


def translation_scores(hypotheses: Sequence[str], references: Sequence[Sequence[str]],
                       src_lengths: Sequence[int]) -> dict[str, Any]:
    """`bleu_chrf` of one hypothesis per distinct source against all its references, plus
    ``single_ref``: every *line* (source, one reference) scored alone, the usual
    one-reference-per-line test-set BLEU (a source with k references counts k times), and
    ``by_length`` (`by_length_table`; its rows carry both, ``bleu`` and
    ``bleu_single_ref``). ``src_lengths``: each source's length in words."""
    metrics = bleu_chrf(hypotheses, references)
    metrics["by_length"] = by_length_table(src_lengths, hypotheses, references)
    line_hyps = [h for h, r in zip(hypotheses, references, strict=True) for _ in r]
    line_refs = [[x] for r in references for x in r]
    line_lengths = [n for n, r in zip(src_lengths, references, strict=True) for _ in r]
    single = bleu_chrf(line_hyps, line_refs)
    metrics["single_ref"] = {"bleu": single["bleu"], "chrf": single["chrf"],
                             "lines": len(line_hyps), "counts": single["counts"]}
    single_rows = {r["lengths"]: r for r in by_length_table(line_lengths, line_hyps, line_refs)}
    for row in metrics["by_length"]:
        row["lines"] = single_rows[row["lengths"]]["n"]
        row["bleu_single_ref"] = single_rows[row["lengths"]]["bleu"]
    return metrics
