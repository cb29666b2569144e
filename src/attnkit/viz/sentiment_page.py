"""The sentiment explorer: a review as written, each word shaded by how it moved the verdict.

``sentiment_page(reviews, summary, path)`` writes one self-contained page: a review picker, a
method picker (attention, gradient x input, integrated gradients...: shown when the views come
from more than one method), a "view" picker among that method's views (each view is one
per-token score: a signed contribution drawn with the diverging palette, red = towards
negative, blue = towards positive; or a non-negative weight such as an attention head or a
pooling share, drawn in greys, light -> dark, so that no weight reads as a direction), the
probability with its label, and a colour bar saying
which colour means what. The text keeps its original case and punctuation:
token positions come from the caller or from `attnkit.viz.spans.token_spans`.

Example:
    >>> r = Review("Great film!", ["great", "film"], 0.93,
    ...            [TokenView("contribution", [1.2, 0.1], signed=True)])
    >>> page = sentiment_page([r], {"model": "bilstm + attention"}, "sentiment.html")
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from attnkit.viz._save import to_numpy
from attnkit.viz.explorer import coerce, explorer_page, palette_data, script_source
from attnkit.viz.palettes import SIGNED, WEIGHTS_BESIDE_SIGNED
from attnkit.viz.spans import token_spans

# IMDB reviews carry HTML line breaks as text; the page shows them as line breaks.
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


@dataclass(frozen=True)
class TokenView:
    """One way of scoring the tokens.

    Args:
        name: shown in the view picker, e.g. ``"head 2"`` or ``"contribution"``.
        values: ``[T]`` numbers, one per token.
        signed: True for contributions (negative = towards the negative class); False for
            weights >= 0 (attention, pooling shares).
        method: the explanation method the view comes from (the method picker groups views
            by it), e.g. ``"attention"`` or ``"integrated-gradients"``.
    """

    name: str
    values: object
    signed: bool = False
    method: str = "attention"


@dataclass(frozen=True)
class Review:
    """One classified text.

    Args:
        text: the review as the user wrote it.
        tokens: the ``T`` tokens the model saw (lower-cased is fine).
        prob: probability of the positive class, in [0, 1].
        views: one or more `TokenView` (or dicts with the same keys).
        spans: ``T`` character spans ``(start, end)`` of the tokens in ``text`` (None: a token
            not in the text); default: found with `token_spans`.
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


def _view_data(view: TokenView, n: int, where: str) -> dict:
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
    r = coerce(item, Review, f"review {k}")
    text, tokens = str(r.text), [str(t) for t in r.tokens]
    if not 0.0 <= float(r.prob) <= 1.0:
        raise ValueError(f"review {k}: prob must be in [0, 1], got {r.prob}")
    spans = token_spans(text, tokens) if r.spans is None else list(r.spans)
    if len(spans) != len(tokens):
        raise ValueError(f"review {k}: {len(spans)} spans for {len(tokens)} tokens")
    views = [_view_data(coerce(v, TokenView, f"review {k} view"), len(tokens), f"review {k} view")
             for v in r.views]
    if not views:
        raise ValueError(f"review {k}: needs at least one view (per-token scores)")
    return {"segments": _segments(text, spans), "tokens": tokens, "prob": float(r.prob),
            "labels": [str(r.labels[0]), str(r.labels[1])], "views": views,
            "missing": [i for i, s in enumerate(spans) if s is None]}


def sentiment_page(reviews: Sequence[Review | Mapping], summary: Mapping[str, object] | None,
                   path: str | os.PathLike | None = None, *,
                   title: str = "Sentiment: which words moved the verdict",
                   note: str | None = None) -> str:
    """Build (and optionally write, atomically) the sentiment explorer page.

    Args:
        reviews: `Review` items (or dicts with the same keys).
        summary: model and data facts for the summary box.
        path: where to write the page; None only returns it.
        title: page heading.
        note: one more sentence under the legend (which method the page opens on, and why).

    Returns:
        The HTML text.

    Raises:
        ValueError: no review, a view whose length is not the token count, bad spans.
    """
    if not reviews:
        raise ValueError("sentiment_page needs at least one review")
    data = {"reviews": [_review_data(r, k) for k, r in enumerate(reviews)],
            "palettes": palette_data(SIGNED, WEIGHTS_BESIDE_SIGNED), "signed": SIGNED,
            "weights": WEIGHTS_BESIDE_SIGNED}
    legend = ("The review is shown as written; each word the model read is shaded: red pushed "
              "the verdict towards negative, blue towards positive (or, for a weight view, "
              "darker grey = more weight).",
              "Pick a review, a method and a view below; hover over or Tab to a word for its "
              "exact score.", *([note] if note else []))
    return explorer_page(title, legend, summary, body=_BODY, data=data, script=_JS, css=_CSS,
                         path=path)


_BODY = """
<div class="controls">
  <span id="review-box"><label for="review">Review</label> <select id="review"></select></span>
  <span id="method-box"><label for="method">Method</label> <select id="method"></select></span>
  <span id="view-box"><label for="view">View</label> <select id="view"></select></span>
</div>
<p id="verdict" class="verdict"></p>
<div id="bar"></div>
<div id="text" class="review"></div>
<p id="missing" class="muted"></p>
<p id="readout" class="muted" aria-live="polite">Hover over or Tab to a word.</p>
"""

_CSS = """
.verdict { font-size: 1.25em; margin: .3em 0; }
.verdict .meter { display: inline-block; width: 160px; height: 12px; margin: 0 .6em;
                  vertical-align: middle; border: 1px solid #999; border-radius: 2px;
                  background: #eee; position: relative; }
.verdict .fill { position: absolute; left: 0; top: 0; bottom: 0; }
.review { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.9; font-size: 1.05em;
          border: 1px solid var(--line); border-radius: 6px; padding: .6em .9em; max-width: 80ch; }
"""

_JS = r"""
const revSel = document.getElementById("review"), viewSel = document.getElementById("view");
const methSel = document.getElementById("method");
const readout = document.getElementById("readout");
let rev = null, chips = [];

function preview(r) {
  const t = r.segments.map((s) => s[0]).join("").replace(/\s+/g, " ").trim();
  return t.length > 60 ? t.slice(0, 60) + "\u2026" : t;
}
function build() {
  rev = DATA.reviews[Number(revSel.value)];
  const keepMethod = methSel.value;
  methSel.replaceChildren();
  const methods = [...new Set(rev.views.map((v) => v.method))];
  methods.forEach((m) => option(methSel, m, m));
  if (methods.includes(keepMethod)) methSel.value = keepMethod;
  document.getElementById("method-box").hidden = methods.length < 2;
  fillViews();
  const pos = rev.prob >= 0.5, verdict = document.getElementById("verdict");
  const meter = el("span", "meter"), fill = el("span", "fill");
  fill.style.width = (100 * rev.prob).toFixed(1) + "%";
  fill.style.background = "rgb(" + lutRgb(DATA.palettes[DATA.signed], pos ? 0.85 : 0.15) + ")";
  meter.append(fill);
  verdict.replaceChildren(el("b", null, pos ? rev.labels[1] : rev.labels[0]), meter,
    el("span", null, "P(" + rev.labels[1] + ") = " + rev.prob.toFixed(3)));
  const box = document.getElementById("text"); box.replaceChildren(); chips = [];
  for (const [piece, i] of rev.segments) {
    if (i < 0) { box.append(piece === "\n" ? el("br") : document.createTextNode(piece)); continue; }
    const c = el("span", "tok", piece); c.tabIndex = 0; chips[i] = c;
    c.addEventListener("mouseenter", () => show(i)); c.addEventListener("focus", () => show(i));
    box.append(c);
  }
  const miss = rev.missing.map((i) => rev.tokens[i]);
  document.getElementById("missing").textContent = miss.length
    ? "Tokens not found in the text (not shaded above): " + miss.join(", ") : "";
  recolor();
}
function fillViews() {
  const keep = viewSel.value, was = keep ? rev.views[Number(keep)] : null;
  viewSel.replaceChildren();
  const shown = rev.views.map((v, k) => [v, k]).filter(([v]) => v.method === methSel.value);
  shown.forEach(([v, k]) => option(viewSel, k, v.name + (v.signed ? " (signed)" : " (weight)")));
  if (was && shown.some(([, k]) => String(k) === keep)) viewSel.value = keep;
  document.getElementById("view-box").hidden = shown.length < 2;
}
function recolor() {
  const v = rev.views[Number(viewSel.value)];
  const lut = DATA.palettes[v.signed ? DATA.signed : DATA.weights];
  let top = 0; for (const x of v.values) top = Math.max(top, v.signed ? Math.abs(x) : x);
  top = top > 0 ? top : 1;
  chips.forEach((c, i) => {
    if (!c) return;
    const x = v.values[i];
    paint(c, lut, v.signed ? 0.5 + 0.5 * x / top : x / top);
    c.title = rev.tokens[i] + ": " + (v.signed && x > 0 ? "+" : "") + fmt(x);
  });
  const bar = v.signed
    ? colorbar(lut, "\u2190 towards " + rev.labels[0] + " (" + fmt(-top) + ")",
               "towards " + rev.labels[1] + " (+" + fmt(top) + ") \u2192")
    : colorbar(lut, "0 (no weight)", fmt(top) + " (most weight)");
  document.getElementById("bar").replaceChildren(bar);
}
function show(i) {
  const v = rev.views[Number(viewSel.value)], x = v.values[i];
  const dir = !v.signed ? "weight" : x > 0 ? "towards " + rev.labels[1] : x < 0
    ? "towards " + rev.labels[0] : "no effect";
  readout.textContent = "\u201c" + rev.tokens[i] + "\u201d, " + v.name + ": "
    + (v.signed && x > 0 ? "+" : "") + fmt(x) + " (" + dir + ")";
}
DATA.reviews.forEach((r, k) => option(revSel, k, (k + 1) + ": " + preview(r)));
document.getElementById("review-box").hidden = DATA.reviews.length < 2;
revSel.addEventListener("change", build);
viewSel.addEventListener("change", recolor);
methSel.addEventListener("change", () => { fillViews(); recolor(); });
build();
"""

# The policy source of this page's script: a page that shows it in a frame (the live page of
# `attnkit serve`) lists it in its own policy, which the frame inherits.
SCRIPT_SOURCE = script_source(_JS)
