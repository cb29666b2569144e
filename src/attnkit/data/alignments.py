"""Word alignments as data: Pharaoh lines, gold links, and their scores (precision, recall, AER).

A sentence's alignment is a set of links ``(i, j)``: source (English) token ``i`` and target
(French) token ``j``, both 0-based indices of the sentence's whitespace tokens. A Pharaoh line
writes them as ``i-j`` separated by spaces (``0-0 1-2 2-1``).

Gold links come in the format of the WPT03 shared task (Mihalcea & Pedersen 2003): one link a
line, ``k e f S|P`` with the sentence ``k``, the English token ``e`` and the French token ``f``
1-based, ``S`` a sure and ``P`` a possible link. Scores follow Och & Ney (2003), summed over the
corpus: with ``A`` the predicted links, ``S`` the sure and ``P`` the sure-or-possible ones,
``precision = |A & P| / |A|``, ``recall = |A & S| / |S|`` and
``AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)``.

Example:
    ```python
    gold = read_gold("trial.wa", [len(s.split()) for s in english],
                     [len(s.split()) for s in french])
    scores = alignment_scores(predicted, gold)   # {"precision": ..., "recall": ..., "aer": ...}
    format_pharaoh({(0, 0), (2, 1)})             # "0-0 2-1"
    ```
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.errors import DataError
from attnkit.fileio import read_user_text

Link = tuple[int, int]
Links = set[Link]


@dataclass
class Gold:
    """The gold links of one sentence pair (0-based; ``possible`` includes the sure ones).

    Attributes:
        sure: links every annotator agreed on.
        possible: sure and possible links.
    """

    sure: Links = field(default_factory=set)
    possible: Links = field(default_factory=set)


def format_pharaoh(links: Iterable[Link]) -> str:
    """One Pharaoh line: the links sorted by source then target index (``"0-0 2-1"``)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def parse_pharaoh(line: str, *, where: str = "alignment", line_no: int | None = None
                  ) -> Links:
    """The links of one Pharaoh line (``"0-0 2-1"``; ``i-j`` or ``ipj`` per link).

    Raises:
        DataError: a field that is not ``i-j`` with whole numbers.
    """
    links = set()
    for item in line.split():
        parts = item.replace("p", "-").split("-")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise DataError(f"not a Pharaoh link: {item!r} (expected i-j)", path=where,
                            line=line_no)
        links.add((int(parts[0]), int(parts[1])))
    return links


def read_pharaoh(path: str | os.PathLike) -> list[Links]:
    """Every line of a Pharaoh file (one sentence pair a line).

    Raises:
        DataError: a missing, unreadable or oversized file (`attnkit.fileio.read_user_input`),
            or a malformed link.
    """
    path = Path(path)
    text = read_user_text(path, "the alignment file")
    return [parse_pharaoh(line, where=str(path), line_no=n)
            for n, line in enumerate(text.splitlines(), 1)]


def read_gold(path: str | os.PathLike, src_lengths: Sequence[int],
              tgt_lengths: Sequence[int]) -> list[Gold]:
    """Gold links (``k e f S|P``, 1-based) for sentence pairs of the given token counts.

    Args:
        path: the gold file (WPT03 format, e.g. ``trial.wa``).
        src_lengths, tgt_lengths: the number of source and target tokens of each pair.

    Returns:
        One `Gold` per pair, 0-based (pairs without a gold line get empty sets).

    Raises:
        DataError: a missing, unreadable or oversized file (`attnkit.fileio.read_user_input`:
            ``/dev/zero`` is one error, not an endless read), a malformed line, a sentence
            number beyond the pairs, or a token beyond its sentence (the message names the
            line, the sentence and its length).
    """
    path = Path(path)
    if len(src_lengths) != len(tgt_lengths):
        raise ValueError("src_lengths and tgt_lengths differ in length")
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
    """Precision, recall and alignment error rate over a corpus (Och & Ney 2003), in percent.

    Args:
        predicted: the links of each pair.
        gold: the gold links of each pair (`read_gold`).

    Returns:
        ``{"precision", "recall", "aer", "links"}`` (``links``: how many were predicted).

    Raises:
        ValueError: the two lists differ in length.

    Example:
        ```python
        g = Gold(sure={(0, 0)}, possible={(0, 0), (1, 1)})
        alignment_scores([{(0, 0), (1, 1), (1, 0)}], [g])
        # precision 66.7, recall 100.0, AER 1 - (1 + 2) / (3 + 1) = 25.0
        ```
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(gold)} gold ones")
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
