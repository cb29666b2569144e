"""A review's sentiment and what the model read of it: what the sentiment app's ``predict``
returns. Reviews are read, sorted by length and batched (no padding cost for short ones);
weights are computed only when something shows them; a review with no word the model reads
is marked ``empty`` instead of stopping the batch. `trusted` says which explanation to show
first, and why: the method measured most faithful on this run (``RUN/faithfulness.json`` of
``attnkit sentiment explain``), else in docs/results.md (`attnkit.explain.trust`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnkit.apps.prediction import Prediction
from attnkit.apps.sentiment.prepare import SentimentLoaded
from attnkit.data.review_pipeline import CHUNK_CHARS, ReadReview
from attnkit.errors import UsageError
from attnkit.explain.captum import explain_methods
from attnkit.explain.sentiment import (
    COMPREHENSIVENESS,
    MARGIN,
    METHODS,
    MIN_REVIEWS,
    SIGNED,
    attribute,
    measured,
    token_scores,
)
from attnkit.explain.trust import docs_measured, run_trust

FAITHFULNESS = "faithfulness.json"   # RUN/faithfulness.json: `sentiment explain`'s table
DOCS_FIGURES = docs_measured("sentiment", COMPREHENSIVENESS, margin=MARGIN,
                             min_count=MIN_REVIEWS)


def trusted(run: str | os.PathLike, carried: Sequence[str]) -> str:
    """The method of ``carried`` to show first, by the run's ``faithfulness.json`` else
    `DOCS_FIGURES`; an unreadable or non-finite table counts as none (one warning names it).
    """
    return run_trust(run, carried, FAITHFULNESS, "the run's faithfulness table",
                     lambda table: measured(table, "measured on this run by attnkit sentiment "
                                            f"explain, {table.get('reviews', '?')} reviews"),
                     DOCS_FIGURES)


@dataclass
class SentimentPrediction(Prediction):
    """One review's sentiment and what the model read of it.

    Attributes:
        prob: P(positive); None for an empty review.
        label: ``"positive"`` (prob >= 0.5), ``"negative"``, or ``"empty"`` (no word read).
        tokens: the tokens the model read (at most maxlen).
        weights: ``[len(tokens)]`` float32, each token's share of the decision (sums to 1;
            see `attnkit.explain.sentiment.attribute`); None when not asked.
        contributions: ``[len(tokens)]`` float32, each token's signed part of the logit
            (> 0 towards positive; they sum to the logit minus the bias); None when not asked.
        spans: ``(start, end)`` of each token in ``text``, or None when not found.
        unknown: share of ``tokens`` unknown to the vocabulary (0..1).
        truncated: tokens cut off by maxlen (0 if none).
        explanations: other per-token explanations by method, each ``[len(tokens)]``
            (``"rollout"``: shares; gradients: signed), when asked (`attnkit.explain.sentiment`).
        shown: the method the shading, a figure and the page open on (the first of ``explain``,
            else attention).
        why: how far this run lets one trust attention (`trusted`), or None.
    """

    text: str
    prob: float | None
    label: str
    tokens: list[str]
    weights: np.ndarray | None
    contributions: np.ndarray | None
    spans: list[tuple[int, int]] | None
    unknown: float
    truncated: int
    explanations: dict[str, np.ndarray] | None = None
    shown: str = "attention"
    why: str | None = None

    @property
    def empty(self) -> bool:
        return self.prob is None

    def to_dict(self) -> dict[str, Any]:
        def floats(a):
            return None if a is None else [float(x) for x in a]
        return {"text": self.text, "prob": self.prob,
                "label": self.label, "tokens": self.tokens, "weights": floats(self.weights),
                "contributions": floats(self.contributions),
                "spans": None if self.spans is None else [list(s) for s in self.spans],
                "unknown": round(self.unknown, 4), "truncated": self.truncated,
                **({"explanations": {k: floats(v) for k, v in self.explanations.items()}}
                   if self.explanations else {}), "shown": self.shown, "why": self.why}

    def text_line(self, color: str = "never", **show: Any) -> str:
        """``P(positive) = ...`` and the words shaded in a terminal (red towards negative, blue
        towards positive); ``color`` ``"never"`` writes each word's signed share (``+0.42``),
        ``"auto"`` shades when standard output is a terminal.
        """
        import sys

        from attnkit.viz.text import shade_text_ansi

        if self.empty:
            return "(no word the model reads: nothing predicted)"
        head = f"P(positive) = {self.prob:.4f}  ({self.label})"
        values, signed = self.contributions, True
        if self.shown != "attention" and self.explanations:
            values, signed = self.explanations[self.shown], self.shown in SIGNED
            head += f"  [{self.shown}]"
        if values is None:
            return head
        shaded = color == "always" or (color == "auto" and sys.stdout.isatty())
        return head + "\n" + shade_text_ansi(self.tokens, values, color=shaded, signed=signed)

    def note(self) -> str | None:
        if self.empty:
            return "no word the model reads: nothing predicted"
        parts = []
        if self.unknown:
            parts.append(f"{self.unknown:.0%} of its {len(self.tokens)} token(s) are unknown "
                         "to the model's vocabulary")
        if self.truncated:
            parts.append(f"{self.truncated} token(s) cut off (the model reads "
                         f"{len(self.tokens)})")
        return "; ".join(parts) or None

    def figure(self):
        """One row of token cells coloured by weight, titled with the probability."""
        from attnkit.viz.heatmap import alignment_figure

        if self.empty or self.weights is None:
            raise UsageError(f"no weights to draw for {self.text[:40]!r} (an empty review, or "
                             "weights not asked for)")
        fig = alignment_figure(self.weights[None, :], self.tokens, [self.label],
                               title=f"P(positive) = {self.prob:.3f}")
        fig.axes[0].set(xlabel="token", ylabel="")
        return fig

    @classmethod
    def page(cls, predictions: Sequence[SentimentPrediction], summary: dict[str, Any]) -> str:
        """The sentiment explorer: each review as written, shaded by which way each word
        pushed the verdict (signed contributions) or by its share of the decision."""
        from attnkit.viz import Review, TokenView, sentiment_page

        shown = [p for p in predictions if not p.empty and p.weights is not None]
        if not shown:
            raise UsageError("nothing to show on the page: no review with words the model reads")
        # Each review opens on its first view: the shown (trusted) method's.
        return sentiment_page([Review(p.text, p.tokens, p.prob, spans=p.spans, views=sorted([
            TokenView("push towards positive / negative", p.contributions, signed=True),
            TokenView("share of the decision (pooling weight)", p.weights),
            *(TokenView(_VIEW_NAMES.get(m, m), v, signed=m in SIGNED, method=m)
              for m, v in (p.explanations or {}).items())], key=lambda v: v.method != p.shown))
            for p in shown], summary, note=shown[0].why)


_VIEW_NAMES = {"rollout": "share of the decision, rolled out through every layer",
               "grad-input": "gradient x input of the logit (push towards positive / negative)",
               "integrated-gradients": "integrated gradients of the logit (push towards "
                                       "positive / negative)"}



def predictions(loaded: SentimentLoaded, texts: Sequence[str], *, batch_size: int = 64,
                attention: bool | str | None = None,
                explain: str | Sequence[str] | None = None) -> list[SentimentPrediction]:
    """P(positive) of each review, with per-token weights unless ``attention`` is False; ``explain``
    adds methods (``"rollout"``, ``"grad-input"``, ``"integrated-gradients"``, a list or
    ``"all"``; the first is shaded). UsageError: no review, not text, a batch size below 1, an
    unknown method.
    """
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    methods = explain_methods(explain, METHODS)
    # Read at each call, not at load: `sentiment explain` may store a new table while the run
    # is served, and the next answer should say what it measured (a capped JSON read).
    why = trusted(loaded.path, ["attention"]) if not methods and attention is not False \
        else None
    reads: list[ReadReview | None] = []   # None: blank, or no token the model reads
    for i, text in enumerate(texts, 1):
        if not isinstance(text, str):
            raise UsageError(f"review {i} is not text: {type(text).__name__}")
        seen = loaded.pipeline.read(text) if text.strip() else None
        reads.append(seen if seen is not None and seen.tokens else None)
    out = [SentimentPrediction(text, None, "empty", [], None, None, None, 0.0, 0) for text in texts]
    real = sorted((i for i, r in enumerate(reads) if r is not None),
                  key=lambda i: len(reads[i].tokens))
    for start in range(0, len(real), batch_size):
        rows = real[start:start + batch_size]
        for i, pred in zip(rows, _batch(loaded, [texts[i] for i in rows],
                                        [reads[i] for i in rows],
                                        attention is not False or bool(methods), methods),
                           strict=True):
            pred.why = why
            out[i] = pred
    return out


def _batch(loaded: SentimentLoaded, texts: Sequence[str], reads: Sequence[ReadReview],
           weights: bool, methods: Sequence[str] = ()) -> list[SentimentPrediction]:
    """Predictions for reviews of similar length (each with at least one token), run on
    columns cut to the longest of them."""
    from attnkit.viz import token_spans

    pipeline, model = loaded.pipeline, loaded.model
    # With masking a review's output does not depend on its padding, so the batch runs on
    # its longest review's columns; the 2018 mode attends to padding and needs all of them.
    keep = max(len(r.ids) for r in reads) if model.config.mask_padding else pipeline.maxlen
    ids, lengths = (t.to(loaded.device) for t in pipeline.pad(reads, keep))
    probs, scores, signed = (attribute(model, ids, lengths) if weights else
                             (model.predict_proba(ids, lengths), None, None))
    extra = {m: token_scores(model, ids, lengths, m).float().cpu() for m in methods
             if m != "attention"}
    out = []
    for b, (text, seen) in enumerate(zip(texts, reads, strict=True)):
        real, prob = pipeline.tokens_in(len(seen.ids), keep), float(probs[b])
        out.append(SentimentPrediction(
            text, prob, "positive" if prob >= 0.5 else "negative", seen.tokens,
            None if scores is None else scores[b, real].float().cpu().numpy(),
            None if signed is None else signed[b, real].float().cpu().numpy(),
            # Where each kept token sits in the review (pre-truncation kept the last ones).
            None if len(text) > CHUNK_CHARS else token_spans(
                text, seen.tokens, from_end=seen.dropped > 0 and pipeline.truncating == "pre"),
            seen.unknown_share, seen.dropped,
            {m: v[b, real].numpy() for m, v in extra.items()} or None,
            methods[0] if methods else "attention"))
    return out
