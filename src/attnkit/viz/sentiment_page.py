"""The sentiment explorer: a review as written, each word shaded by how it moved the verdict.

`sentiment_page` writes one self-contained page: a review, method and view picker, the
probability and its label, and a colour bar. Signed contributions use the diverging palette
(red = towards negative, blue = towards positive), weights greys (docs/concepts.md, "Explorer
pages"); token positions come from the caller or `attnkit.viz.spans.token_spans`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from attnkit.viz import explorer
from attnkit.viz._save import to_numpy
from attnkit.viz.palettes import SIGNED, WEIGHTS_BESIDE_SIGNED
from attnkit.viz.spans import token_spans

# IMDB reviews carry HTML line breaks as text; the page shows them as line breaks.
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)

FILES = explorer.app_files("sentiment_page")
# The policy source of its script, listed by `attnkit serve`'s live page, which frames this page.
SCRIPT_SOURCE = explorer.script_source(FILES["script"])


@dataclass(frozen=True)
class TokenView:
    """One way of scoring the ``T`` tokens: ``values [T]`` shown as ``name`` in the view picker,
    ``signed`` for contributions (else weights >= 0), grouped by ``method``.
    """

    name: str
    values: object
    signed: bool = False
    method: str = "attention"


@dataclass(frozen=True)
class Review:
    """One classified text.

    Args:
        text: the review as the user wrote it; ``tokens``: the ``T`` tokens the model saw.
        prob: probability of the positive class, in [0, 1].
        views: one or more `TokenView` (or dicts with the same keys).
        spans: ``T`` character spans of the tokens in ``text`` (default: `token_spans`).
        labels: names of the (negative, positive) classes.
    """

    text: str
    tokens: Sequence[str]
    prob: float
    views: Sequence[TokenView | Mapping]
    spans: Sequence[tuple[int, int] | None] | None = None
    labels: tuple[str, str] = ("negative", "positive")


def _segments(text: str, spans: Sequence[tuple[int, int] | None]) -> list[list]:
    """The text cut into ``[piece, token index or -1]``; a ``<br>`` in the text becomes ``["\\n",
    -1]`` (a line break), everything else is shown exactly as written."""
    out: list[list] = []

    def plain(piece: str) -> None:
        for k, part in enumerate(_BR.split(piece)):
            if k:
                out.append(["\n", -1])
            if part:
                out.append([part, -1])

    at = 0
    for i, span in sorted(((i, s) for i, s in enumerate(spans) if s is not None),
                          key=lambda p: p[1][0]):
        start, end = span
        if start < at or end > len(text) or end <= start:
            raise ValueError(f"token {i}: span {span} overlaps another or leaves the text "
                             f"({len(text)} characters)")
        plain(text[at:start])
        out.append([text[start:end], i])
        at = end
    plain(text[at:])
    return out


def _view_data(view: TokenView | Mapping, n: int, where: str) -> dict:
    view = explorer.coerce(view, TokenView, where)
    v = to_numpy(view.values, f"{where} values").astype(np.float64)
    if v.shape != (n,):
        raise ValueError(f"{where} {view.name!r}: values must be [T] = [{n}] (one per token), "
                         f"got {list(v.shape)}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{where} {view.name!r}: values contain NaN or infinity")
    if not view.signed and v.size and v.min() < 0:
        raise ValueError(f"{where} {view.name!r}: weights must be >= 0; pass signed=True for "
                         "contributions")
    return {"name": str(view.name), "signed": bool(view.signed), "method": str(view.method),
            "values": [float(f"{x:.5g}") for x in v]}


def _review_data(item, k: int) -> dict:
    r = explorer.coerce(item, Review, f"review {k}")
    text, tokens = str(r.text), [str(t) for t in r.tokens]
    if not 0.0 <= float(r.prob) <= 1.0:
        raise ValueError(f"review {k}: prob must be in [0, 1], got {r.prob}")
    spans = token_spans(text, tokens) if r.spans is None else list(r.spans)
    if len(spans) != len(tokens):
        raise ValueError(f"review {k}: {len(spans)} spans for {len(tokens)} tokens")
    views = [_view_data(v, len(tokens), f"review {k} view") for v in r.views]
    if not views:
        raise ValueError(f"review {k}: needs at least one view (per-token scores)")
    return {"segments": _segments(text, spans), "tokens": tokens, "prob": float(r.prob),
            "labels": [str(r.labels[0]), str(r.labels[1])], "views": views,
            "missing": [i for i, s in enumerate(spans) if s is None]}


def sentiment_page(reviews: Sequence[Review | Mapping], summary: Mapping[str, object] | None,
                   path: str | os.PathLike | None = None, *,
                   title: str = "Sentiment: which words moved the verdict",
                   note: str | None = None) -> str:
    """Build (and optionally write to ``path``, atomically) the sentiment explorer page's HTML.

    ``reviews``: `Review` items (or dicts); ``summary``: facts for the summary box; ``note``: one
    more sentence under the legend. ValueError: no review, a view of the wrong length, bad spans.
    """
    if not reviews:
        raise ValueError("sentiment_page needs at least one review")
    data = {"reviews": [_review_data(r, k) for k, r in enumerate(reviews)],
            "palettes": explorer.palette_data(SIGNED, WEIGHTS_BESIDE_SIGNED), "signed": SIGNED,
            "weights": WEIGHTS_BESIDE_SIGNED}
    legend = ("The review is shown as written; each word the model read is shaded: red pushed "
              "the verdict towards negative, blue towards positive (or, for a weight view, "
              "darker grey = more weight).",
              "Pick a review, a method and a view below; hover over or Tab to a word for its "
              "exact score.", *([note] if note else []))
    return explorer.explorer_page(title, legend, summary, data=data, path=path, **FILES)
