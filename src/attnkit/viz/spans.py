"""Where each model token sits in the text the user wrote, so pages can show the text as written.

Tokens are lower-cased, stripped of punctuation and marked as sub-words, so `token_spans` finds
each in the text (case-insensitively, in order, preferably at a word start) and returns its
span in the original string; a token not found (``<unk>``) gets None.

Example:
    >>> token_spans("Great film, isn't it?!", ["great", "film", "isn't", "it"])
    [(0, 5), (6, 10), (12, 17), (18, 20)]
"""

from __future__ import annotations

from collections.abc import Sequence

# Sentencepiece marks a word start with U+2581; it is not in the text.
_SUBWORD_MARKS = "\u2581"


def _lowered_index(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased and, per lowered character, the index of its original character.

    ``str.lower`` can change lengths ("İ" -> "i̇", two characters), so positions in the lowered
    text are mapped back through this table rather than assumed equal.
    """
    pairs = [(c, i) for i, ch in enumerate(text) for c in ch.lower()]
    return "".join(c for c, _ in pairs), [i for _, i in pairs]


def _find(low: str, needle: str, cursor: int, from_end: bool) -> int:
    """The next match of ``needle`` from ``cursor`` that starts a word or touches the previous
    match (a sub-word continues its word); else the nearest match at all; -1 if none.

    Without the word-start rule a short token ("b") would land inside an earlier word ("zebra").
    """
    first = -1
    at = low.rfind(needle, 0, cursor) if from_end else low.find(needle, cursor)
    while at >= 0:
        first = at if first < 0 else first
        touches = (at + len(needle) == cursor) if from_end else (at == cursor and at > 0)
        if touches or at == 0 or not low[at - 1].isalnum():
            return at
        at = low.rfind(needle, 0, at + len(needle) - 1) if from_end else low.find(needle, at + 1)
    return first


def token_spans(text: str, tokens: Sequence[str], *,
                from_end: bool = False) -> list[tuple[int, int] | None]:
    """Character span ``(start, end)`` of each of the ``T`` ``tokens`` in ``text``, or None.

    ``from_end`` matches from the end backwards (the model kept the last tokens of a long text),
    so a repeated word lands on its last use.
    """
    low, origin = _lowered_index(text)
    order = range(len(tokens) - 1, -1, -1) if from_end else range(len(tokens))
    spans: list[tuple[int, int] | None] = [None] * len(tokens)
    cursor = len(low) if from_end else 0
    for k in order:
        needle = str(tokens[k]).strip(_SUBWORD_MARKS).lower()
        if not needle:
            continue
        at = _find(low, needle, cursor, from_end)
        if at < 0:
            continue
        end = at + len(needle)
        spans[k] = (origin[at], origin[end - 1] + 1)
        cursor = at if from_end else end
    return spans
