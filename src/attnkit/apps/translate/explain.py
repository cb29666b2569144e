"""What ``translate predict --explain`` and ``--alignments`` add to a translation: other
explanations of each output piece (rollout, gradient x input, integrated gradients) beside
its attention (`add_explanations`), and word links between input and output (`add_alignments`).
"""

from __future__ import annotations

from collections.abc import Sequence

from attnkit.apps.translate.engines import TranslateLoaded
from attnkit.apps.translate.prediction import TranslationPrediction

EXPLAIN = ("attention", "rollout", "grad-input", "integrated-gradients")


def add_explanations(loaded: TranslateLoaded, predictions: Sequence[TranslationPrediction],
                     methods: Sequence[str]) -> None:
    """Fill each prediction's ``explanations`` (method -> ``[T_out, T_src]``, rows summing to
    1) for the methods other than attention, by forced decoding of its own output."""
    from attnkit.alignment.aligner import attribution_rows, rollout_rows
    from attnkit.decoding.forced import forced_decode

    extra = [m for m in methods if m != "attention"]
    p_src, p_tgt = loaded.pipeline.src_vocab, loaded.pipeline.tgt_vocab
    for p in predictions:
        if not p.tokens:
            continue
        src_ids, tgt_ids = p_src.encode(p.source_tokens), p_tgt.encode(p.tokens)
        p.explanations = {m: (rollout_rows(forced_decode(loaded.model, [src_ids], [tgt_ids])[0],
                                           False, len(tgt_ids)) if m == "rollout" else
                              attribution_rows(loaded.model, src_ids, tgt_ids, m)).numpy()
                          for m in extra}


def add_alignments(loaded: TranslateLoaded, predictions: Sequence[TranslationPrediction]) -> None:
    """Fill each prediction's ``alignment`` (``(source word, output word)`` links between
    whitespace tokens, by the run's own attention as ``translate align`` reads it), and
    ``piece_links`` where the output re-reads as the same pieces (a run with attention: the
    caller checked it).
    """
    from attnkit.alignment.aligner import piece_links
    from attnkit.apps.translate.alignment import align_pairs

    shown = [p for p in predictions if p.tokens and p.text.split()]
    if not shown:
        return
    result = align_pairs(loaded, [p.source.split() for p in shown],
                         [p.text.split() for p in shown], normalize=False, model_only=True)
    for p, links, pair in zip(shown, result.links, result.pairs, strict=True):
        p.alignment, p.alignment_method = sorted(links), result.method
        same = (pair.src_ids == loaded.pipeline.src_vocab.encode(p.source_tokens)
                and pair.tgt_ids == loaded.pipeline.tgt_vocab.encode(p.tokens))
        p.piece_links = sorted((s, t) for t, s in piece_links(pair, links)) if same else None
