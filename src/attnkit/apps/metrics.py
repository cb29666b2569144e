"""Corpus metrics shared by the apps: one sacrebleu wrapper for translation and captioning.

BLEU and chrF are sacrebleu's (cased, 13a tokenizer, exponential smoothing: its defaults, so the
signature printed with every score is the standard one). Each hypothesis may have any number of
references; a sentence with fewer references than the most has ``None`` in the missing reference
streams, which sacrebleu skips (repeating a reference instead would count its n-grams twice).

Example:
    ```python
    scores = bleu_chrf(["le chat dort ."], [["le chat dort .", "le chat est endormi ."]])
    scores["bleu"], scores["chrf"], scores["signature"]
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sacrebleu


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """sacrebleu's layout: stream ``k`` holds the ``k``-th reference of every sentence.

    Args:
        references: ``references[i]`` lists sentence ``i``'s references (at least one each).

    Raises:
        ValueError: a sentence without any reference, or no sentences.
    """
    if not references:
        raise ValueError("no references given")
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"sentence {i} has no reference")
    width = max(len(r) for r in references)
    return [[r[k] if k < len(r) else None for r in references] for k in range(width)]


def bleu_chrf(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Corpus BLEU and chrF (0-100) of ``hypotheses`` against their references.

    Args:
        hypotheses: one detokenized string per sentence.
        references: ``references[i]`` lists sentence ``i``'s references (any number >= 1).

    Returns:
        ``{"bleu", "chrf", "counts": {matches, totals, precisions, bp, sys_len, ref_len},
        "signature"}``.
    """
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
