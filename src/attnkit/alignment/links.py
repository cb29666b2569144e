"""Word links: Pharaoh lines and WPT03 gold files, their scores (precision, recall, AER),
the two directions combined (symmetrisation), and links drawn from score matrices.

A link ``(i, j)`` joins source token ``i`` and target token ``j`` (0-based whitespace tokens),
written ``0-0 1-2 2-1`` in Pharaoh. Formulas and conventions: docs/concepts.md, "Word
alignment"."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from attnkit.errors import DataError
from attnkit.fileio import read_user_text

Link = tuple[int, int]
Links = set[Link]


@dataclass
class Gold:
    """The gold links of one sentence pair, 0-based: ``sure`` ones and ``possible`` ones (the
    sure included)."""

    sure: Links = field(default_factory=set)
    possible: Links = field(default_factory=set)


def format_pharaoh(links: Iterable[Link]) -> str:
    """One Pharaoh line: the links sorted by source then target index (``"0-0 2-1"``)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def read_pharaoh(path: str | os.PathLike) -> list[Links]:
    """The links of every line of a Pharaoh file, one sentence pair a line (``0-0 2-1``;
    ``i-j`` or ``ipj`` per link; `read_user_text`)."""
    out = []
    for n, line in enumerate(read_user_text(path, "the alignment file").splitlines(), 1):
        out.append(set())
        for item in line.split():
            parts = item.replace("p", "-").split("-")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise DataError(f"not a Pharaoh link: {item!r} (expected i-j)", path=str(path),
                                line=n)
            out[-1].add((int(parts[0]), int(parts[1])))
    return out


def read_gold(path: str | os.PathLike, src_lengths: Sequence[int],
              tgt_lengths: Sequence[int]) -> list[Gold]:
    """One `Gold` per pair, 0-based, from a WPT03 file (``k e f S|P``, 1-based) for pairs of
    ``src_lengths`` and ``tgt_lengths`` tokens. DataError names the line for a malformed
    one, a sentence beyond the pairs or a token beyond its sentence."""
    text = read_user_text(path, "the gold links")
    gold = [Gold() for _ in src_lengths]
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) not in (3, 4) or not all(f.isdigit() for f in fields[:3]) or (
                len(fields) == 4 and fields[3] not in ("S", "P")):
            raise DataError(f"not a gold link: {line.strip()!r} (expected 'k e f S|P', "
                            "1-based)", path=str(path), line=n)
        k, e, f = (int(x) for x in fields[:3])
        sure = len(fields) == 3 or fields[3] == "S"
        if not 1 <= k <= len(gold):
            raise DataError(f"sentence {k} does not exist: there are {len(gold)} sentence "
                            "pairs", path=str(path), line=n)
        for name, index, length in (("English", e, src_lengths[k - 1]),
                                    ("French", f, tgt_lengths[k - 1])):
            if not 1 <= index <= length:
                raise DataError(f"sentence {k} has {length} {name} tokens; the link names "
                                f"token {index}", path=str(path), line=n)
        link = (e - 1, f - 1)
        gold[k - 1].possible.add(link)
        if sure:
            gold[k - 1].sure.add(link)
    return gold


def alignment_scores(predicted: Sequence[Iterable[Link]], gold: Sequence[Gold]
                     ) -> dict[str, float]:
    """``{"precision", "recall", "aer", "links"}`` of each pair's predicted links against its
    `Gold`, over the corpus, in percent (``links``: how many were predicted)."""
    a = s = a_s = a_p = 0
    for links, g in zip(predicted, gold, strict=True):
        links = set(links)
        a += len(links)
        s += len(g.sure)
        a_s += len(links & g.sure)
        a_p += len(links & g.possible)
    return {"precision": 100.0 * a_p / a if a else 0.0,
            "recall": 100.0 * a_s / s if s else 0.0,
            "aer": 100.0 * (1.0 - (a_s + a_p) / (a + s)) if a + s else 0.0,
            "links": a}


SYMMETRIZATIONS = ("none", "intersection", "union", "grow-diag-final-and")
EXTRACTIONS = ("argmax", "threshold")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Iterable[Link], reverse: Iterable[Link]) -> Links:
    """Koehn's grow-diag-final-and (as in Moses) of two directions' ``(source, target)``
    links: the intersection, grown by union links next to it that align a new word, then
    union links whose two words are both still unaligned."""
    forward, reverse = set(forward), set(reverse)
    union = forward | reverse
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}
    n_src = max((i for i, _ in union), default=-1) + 1
    n_tgt = max((j for _, j in union), default=-1) + 1

    def add(i: int, j: int) -> None:
        links.add((i, j))
        src_done.add(i)
        tgt_done.add(j)

    grown = True
    while grown:   # grow-diag: neighbours of current links, one side unaligned
        grown = False
        for i in range(n_src):
            for j in range(n_tgt):
                if (i, j) not in links:
                    continue
                for di, dj in _NEIGHBOURS:
                    ni, nj = i + di, j + dj
                    if (ni, nj) in union and (ni, nj) not in links and (
                            ni not in src_done or nj not in tgt_done):
                        add(ni, nj)
                        grown = True
    for direction in (forward, reverse):   # final-and: both words still unaligned
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                add(i, j)
    return links


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link] | None, method: str) -> Links:
    """One link set from two directions (``method`` in `SYMMETRIZATIONS`; ``"none"`` keeps
    ``forward``); ValueError when it needs ``reverse`` without it."""
    forward = set(forward)
    if method == "none":
        return forward
    if reverse is None:
        raise ValueError(f"{method} needs the reverse direction's links")
    reverse = set(reverse)
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    return grow_diag_final_and(forward, reverse)


_symmetrize = symmetrize   # `extract`'s parameter takes the name


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
    ``[..., n_tgt, n_src]`` (leading dimensions kept): each word collects its pieces
    (``*_owner[p]``: piece ``p``'s words, `attnkit.alignment.text.pieces_to_tokens`) by their
    ``"mean"`` or ``"sum"``; a word without pieces has a zero row or column."""
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
    """Word links ``(source, target)`` from word matrices ``[n_tgt, n_src]``: ``forward``
    (each target word's scores over the source) and, to symmetrise, ``reverse`` (column ``j``:
    source word ``j``'s scores over the target). ``extraction``: each word's ``"argmax"``, or
    every score ``>= threshold``; ``symmetrize``: one of `SYMMETRIZATIONS`."""
    fwd = {(s, t) for t, s in _one_way(forward, extraction, threshold)}
    rev = None if reverse is None else _one_way(reverse.T, extraction, threshold)
    return _symmetrize(fwd, rev, symmetrize)
