"""Translation metrics beyond corpus BLEU: by source length, one reference per line, and the
table the CLI prints.

Tatoeba lists alternative translations of one English sentence on adjacent lines. Each
distinct source is decoded once and scored against all its references (multi-reference BLEU);
``single_ref`` scores every *line* against its own reference, the usual one-reference-per-line
test-set BLEU.

Example:
    ```python
    metrics = score_translations(["le chat dort ."], ["the cat sleeps ."],
                                 [["le chat dort .", "le chat est endormi ."]])
    metrics["bleu"], metrics["single_ref"]["bleu"], metrics["by_length"]
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnkit.apps.metrics import bleu_chrf
from attnkit.data.text_codec import SRC_LANG, word_count

LENGTH_BINS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, 30), (31, None))


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


def score_translations(hypotheses: Sequence[str], sources: Sequence[str],
                       references: Sequence[Sequence[str]]) -> dict[str, Any]:
    """BLEU/chrF of one hypothesis per distinct source against all its references, plus
    ``single_ref``: every *line* (source, one reference) scored alone, the usual
    one-reference-per-line test-set BLEU (a source with k references counts k times).
    ``by_length`` rows carry both (``bleu`` and ``bleu_single_ref``)."""
    # Lengths in words (not subword pieces), so runs with different tokenizers compare.
    src_lengths = [word_count(s, SRC_LANG) for s in sources]
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
        lines.append(f"{metrics['unknown']:.1%} of the source tokens are unknown to the model "
                     "(mean per sentence)")
    lines += [f"{metrics['signature']}", "",
              "source length  sentences    BLEU  |  lines  BLEU 1-ref"]
    for row in metrics["by_length"]:
        lines.append(f"{row['lengths']:>13}  {row['n']:>9}  {row['bleu']:6.2f}  |  "
                     f"{row.get('lines', ''):>5}  {row.get('bleu_single_ref', float('nan')):6.2f}")
    return "\n".join(lines)
