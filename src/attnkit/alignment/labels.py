"""Alignment labels from eflomal, in the pieces a model reads.

The trained aligner learns from eflomal's links (Garg et al. 2019 learned from GIZA++'s).
eflomal is run, as classical aligners are, on much parallel text at once: the training pairs
of the run (written as the alignment gold standard writes text, `aligner_tokens`) together with
any pairs to align, whose whitespace tokens are split the same way and whose links are then
lifted back to the whitespace tokens. `piece_labels` turns word links into the 0/1 matrix over
a pair's pieces that `attnkit.models.alignment_head.alignment_loss` expects.

Example:
    ```python
    links = eflomal_labels([(["the", "house"], ["la", "maison"])], background=tatoeba_pairs)
    y = piece_labels(pair, links[0])       # [target pieces, source pieces]
    ```
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnkit.alignment.pieces import PairPieces
from attnkit.data.align_text import aligner_tokens
from attnkit.data.alignments import Links
from attnkit.data.eflomal_aligner import eflomal_links
from attnkit.data.symmetrize import symmetrize
from attnkit.data.text_codec import SRC_LANG, TGT_LANG

# The links eflomal's two directions are combined into for labels (measured on the WPT03
# trial set: docs/results.md, "Word alignment").
LABEL_SYMMETRIZATION = "grow-diag-final-and"


def _split(tokens: Sequence[str], lang: str) -> tuple[list[str], list[int]]:
    """Whitespace tokens split as the aligner reads them, and each piece's token."""
    words, owner = [], []
    for k, tok in enumerate(tokens):
        parts = [w for w, _ in aligner_tokens(tok, lang)] or [tok.lower()]
        words += parts
        owner += [k] * len(parts)
    return words, owner


def eflomal_labels(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *,
                   background: Sequence[tuple[str, str]] = (),
                   method: str = LABEL_SYMMETRIZATION) -> list[Links]:
    """eflomal's symmetrised links of whitespace-token ``pairs``, fitted together with the raw
    ``background`` pairs (their links are not returned).

    Returns:
        One link set ``(source token, target token)`` per pair.
    """
    return eflomal_word_links(pairs, background=background, methods=(method,))[method]


def eflomal_word_links(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *,
                       background: Sequence[tuple[str, str]] = (),
                       methods: Sequence[str] = (LABEL_SYMMETRIZATION,)
                       ) -> dict[str, list[Links]]:
    """`eflomal_labels` for several ways of combining the two directions from one eflomal
    fit: ``"forward"``, ``"reverse"`` or a symmetrisation (`attnkit.data.symmetrize`)."""
    src, tgt, owners = [], [], []
    for s, t in pairs:
        (sw, so), (tw, to) = _split(s, SRC_LANG), _split(t, TGT_LANG)
        src.append(sw)
        tgt.append(tw)
        owners.append((so, to))
    extra_src, extra_tgt = [], []
    for en, fr in background:
        e, f = [w for w, _ in aligner_tokens(en, SRC_LANG)], [w for w, _ in aligner_tokens(
            fr, TGT_LANG)]
        if e and f:
            extra_src.append(e)
            extra_tgt.append(f)
    forward, reverse = eflomal_links(src + extra_src, tgt + extra_tgt)
    out: dict[str, list[Links]] = {}
    for method in methods:
        found = []
        for k, (so, to) in enumerate(owners):
            if method in ("forward", "reverse"):
                links = forward[k] if method == "forward" else reverse[k]
            else:
                links = symmetrize(forward[k], reverse[k], method)
            found.append({(so[i], to[j]) for i, j in links})
        out[method] = found
    return out


def raw_labels(pairs: Sequence[tuple[str, str]], method: str = LABEL_SYMMETRIZATION
               ) -> list[Links]:
    """eflomal's links of raw pairs, between their aligner tokens (`aligner_tokens`)."""
    src = [[w for w, _ in aligner_tokens(en, SRC_LANG)] for en, _ in pairs]
    tgt = [[w for w, _ in aligner_tokens(fr, TGT_LANG)] for _, fr in pairs]
    forward, reverse = eflomal_links(src, tgt)
    return [symmetrize(f, r, method) for f, r in zip(forward, reverse, strict=True)]


def piece_labels(pair: PairPieces, links: Links) -> torch.Tensor:
    """``[target pieces, source pieces]`` 0/1: a piece pair is labelled when a token of each
    is linked."""
    by_src: dict[int, list[int]] = {}
    for q, words in enumerate(pair.src_owner):
        for w in words:
            by_src.setdefault(w, []).append(q)
    by_tgt: dict[int, list[int]] = {}
    for r, words in enumerate(pair.tgt_owner):
        for w in words:
            by_tgt.setdefault(w, []).append(r)
    y = torch.zeros(len(pair.tgt_owner), len(pair.src_owner))
    for i, j in links:
        for r in by_tgt.get(j, ()):
            for q in by_src.get(i, ()):
                y[r, q] = 1.0
    return y
