"""From score matrices to word links: pieces gathered into words, then argmax or threshold per
word, in one or both directions.

A model scores subword pieces; links are between whitespace tokens. `word_scores` gathers a
piece matrix ``[target pieces, source pieces]`` into a word matrix ``[target words, source
words]``: a source word gets the sum of its pieces' weights (a distribution over source pieces
stays one over source words), a target word the mean of its pieces' rows. `extract` then links
each target word to its best source word (``argmax``) or to every source word above a
``threshold``; with a reverse matrix (each source word's distribution over the target) it does
the same the other way and `attnkit.data.symmetrize` combines the two.

Example:
    ```python
    fwd = word_scores(piece_fwd, tgt_owner, src_owner, n_tgt, n_src)
    rev = word_scores(piece_rev, tgt_owner, src_owner, n_tgt, n_src, source="mean",
                      target="sum")
    links = extract(fwd, rev, "argmax", symmetrize="grow-diag-final-and")
    ```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnkit.data.alignments import Links
from attnkit.data.symmetrize import symmetrize as combine

EXTRACTIONS = ("argmax", "threshold")


def _gather(owner: Sequence[Sequence[int]], n: int, how: str) -> np.ndarray:
    """``[n words, pieces]``: how each word collects its pieces (``"sum"`` or ``"mean"``)."""
    m = np.zeros((n, len(owner)), dtype=np.float64)
    for p, words in enumerate(owner):
        for w in words:
            m[w, p] = 1.0
    if how == "mean":
        m /= np.maximum(m.sum(1, keepdims=True), 1.0)
    return m


def word_scores(pieces: np.ndarray, tgt_owner: Sequence[Sequence[int]],
                src_owner: Sequence[Sequence[int]], n_tgt: int, n_src: int, *,
                target: str = "mean", source: str = "sum") -> np.ndarray:
    """A piece matrix ``[..., target pieces, source pieces]`` as a word matrix
    ``[..., n_tgt, n_src]`` (leading dimensions, such as layers and heads, kept).

    Args:
        pieces: the piece scores.
        tgt_owner, src_owner: for each piece, the word indices it belongs to
            (`attnkit.data.align_text.pieces_to_tokens`).
        n_tgt, n_src: the number of words.
        target, source: how a word collects its pieces on each side (``"mean"`` or ``"sum"``).

    Returns:
        ``[..., n_tgt, n_src]``; a word without pieces (cut off) has a zero row or column.
    """
    if pieces.shape[-2:] != (len(tgt_owner), len(src_owner)):
        raise ValueError(f"piece matrix {pieces.shape} does not match {len(tgt_owner)} target "
                         f"and {len(src_owner)} source pieces")
    return _gather(tgt_owner, n_tgt, target) @ pieces @ _gather(src_owner, n_src, source).T


def _one_way(scores: np.ndarray, extraction: str, threshold: float) -> set[tuple[int, int]]:
    """Links ``(row, column)`` of a matrix: each row's argmax, or every cell >= threshold
    (rows without any weight get none)."""
    links = set()
    for r, row in enumerate(scores):
        if not row.size or row.max() <= 0:
            continue
        if extraction == "argmax":
            links.add((r, int(row.argmax())))
        else:
            links.update((r, int(c)) for c in np.flatnonzero(row >= threshold))
    return links


def extract(forward: np.ndarray, reverse: np.ndarray | None = None,
            extraction: str = "argmax", *, threshold: float = 0.5,
            symmetrize: str = "none") -> Links:
    """Word links ``(source, target)`` from word matrices ``[n_tgt, n_src]``.

    Args:
        forward: each target word's scores over the source words.
        reverse: each source word's scores over the target words, in the same layout
            (column ``j`` is source word ``j``'s distribution); needed to symmetrise.
        extraction: ``"argmax"`` (one link per word and direction) or ``"threshold"``.
        threshold: the smallest score linked (``"threshold"``).
        symmetrize: ``"none"`` (forward only), ``"intersection"``, ``"union"`` or
            ``"grow-diag-final-and"``.

    Returns:
        The links as ``(source index, target index)``.

    Raises:
        ValueError: an unknown extraction; a symmetrisation without ``reverse``.

    Example:
        ```python
        extract(np.array([[0.9, 0.1], [0.3, 0.7]]))      # {(0, 0), (1, 1)}
        ```
    """
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}, "
                         f"got {extraction!r}")
    fwd = {(s, t) for t, s in _one_way(forward, extraction, threshold)}
    if symmetrize == "none":
        return fwd
    if reverse is None:
        raise ValueError(f"symmetrisation {symmetrize} needs the reverse direction")
    rev = set(_one_way(reverse.T, extraction, threshold))
    return combine(fwd, rev, symmetrize)
