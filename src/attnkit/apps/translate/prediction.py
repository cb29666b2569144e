"""One translated sentence with its attention: what the translate app's ``predict`` returns.

Example:
    ```python
    p = predict("runs/demo", ["The cat does not see her."])[0]
    p.text, p.weights.shape          # "Le chat ne la voit pas .", (7, 7)
    p.render("cat.png")              # the alignment heatmap (or .svg / .pdf / .html)
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnkit.apps.prediction import Prediction, rounded
from attnkit.errors import UsageError

# Above this share of unknown source tokens, predict warns that the run cannot read the input.
UNKNOWN_WARNING = 0.10


@dataclass
class TranslationPrediction(Prediction):
    """One translated sentence.

    Attributes:
        source: the input text.
        source_tokens: the tokens the model read (at most ``max_source``; words outside the
            vocabulary were ``<unk>`` to the model).
        tokens: output tokens (``<unk>`` replaced by the most attended source word when asked).
        text: the detokenized translation.
        weights: ``[len(tokens), len(source_tokens)]`` attention (a Transformer's last decoder
            layer, averaged over heads); None for attention='none', the CTranslate2 engine,
            or when not asked.
        score: log-probability of the output.
        unknown: share of the source tokens the vocabulary maps to ``<unk>`` (0..1).
        truncated: source tokens cut off after ``max_source`` (0: read whole).
        layer_weights: a Transformer's cross-attention of every decoder layer and head,
            ``[layers, heads, len(tokens), len(source_tokens)]``, when asked
            (``attention="all"``: the explorer page shows it); None otherwise.
        explanations: other explanations of each output token, by method (``"rollout"``,
            ``"grad-input"``, ``"integrated-gradients"``), each ``[len(tokens),
            len(source_tokens)]`` with rows summing to 1, when asked (``explain``).
        shown: the method a figure draws (``"attention"`` or one of ``explanations``).
        alignment: word links ``(source word, output word)`` between ``source.split()`` and
            ``text.split()`` (0-based), when asked (``alignments=True``).
        alignment_method: how ``alignment`` was found.
        piece_links: ``alignment`` between ``source_tokens`` and ``tokens`` (the page draws
            it), or None when the output's text reads as other pieces than it was written in.
        sentences: for an input of several sentences, each sentence's own prediction, in
            order (`paragraph`); the input's ``weights`` are then None: each sentence has
            its own. None for an input read as one sentence.
    """

    source: str
    source_tokens: list[str]
    tokens: list[str]
    text: str
    weights: np.ndarray | None
    score: float
    unknown: float = 0.0
    truncated: int = 0
    layer_weights: np.ndarray | None = None
    explanations: dict[str, np.ndarray] | None = None
    shown: str = "attention"
    alignment: list[tuple[int, int]] | None = None
    alignment_method: str | None = None
    piece_links: list[tuple[int, int]] | None = None
    sentences: list[TranslationPrediction] | None = None

    @classmethod
    def paragraph(cls, source: str, parts: Sequence[TranslationPrediction],
                  text: str) -> TranslationPrediction:
        """The prediction of an input translated sentence by sentence (`sentences`).

        Args:
            source: the input as given.
            parts: each sentence's prediction, in order (at least one).
            text: their translations joined with the input's breaks
                (`attnkit.data.sentences.Sentences.join`).

        Returns:
            Tokens of every sentence end to end; the score of the whole output (the sum: the
            sentences are decoded independently); ``unknown`` over all source tokens;
            ``truncated`` summed; no weights of its own (see ``sentences``).
        """
        read = sum(len(p.source_tokens) for p in parts)
        return cls(source, [t for p in parts for t in p.source_tokens],
                   [t for p in parts for t in p.tokens], text, None,
                   sum(p.score for p in parts),
                   sum(p.unknown * len(p.source_tokens) for p in parts) / max(read, 1),
                   sum(p.truncated for p in parts), shown=parts[0].shown, sentences=list(parts))

    def to_dict(self) -> dict[str, Any]:
        row = {"source": self.source, "text": self.text, "tokens": self.tokens,
               "source_tokens": self.source_tokens, "score": round(self.score, 6),
               "unknown": round(self.unknown, 4), "truncated": self.truncated,
               "weights": rounded(self.weights, 4)}
        if self.layer_weights is not None:
            row["layer_weights"] = rounded(self.layer_weights, 4)
        if self.explanations:
            row["explanations"] = {k: rounded(v, 4) for k, v in self.explanations.items()}
        if self.alignment is not None:
            row["alignment"] = " ".join(f"{i}-{j}" for i, j in self.alignment)
            row["alignment_method"] = self.alignment_method
        if self.sentences is not None:
            row["sentences"] = [p.to_dict() for p in self.sentences]
        return row

    def text_line(self, **show: Any) -> str:
        return self.text

    def shown_weights(self) -> np.ndarray | None:
        """``[len(tokens), len(source_tokens)]``: the attention, or the explanation `shown`;
        for an input of several sentences each sentence's block on the diagonal (an output
        token attends to its own sentence only: zero elsewhere). None when there are none."""
        if self.sentences is not None:
            blocks = [p.shown_weights() for p in self.sentences]
            if any(b is None for b in blocks):
                return None
            out = np.zeros((len(self.tokens), len(self.source_tokens)), np.float32)
            row = col = 0
            for p, b in zip(self.sentences, blocks, strict=True):
                out[row:row + len(p.tokens), col:col + len(p.source_tokens)] = b
                row, col = row + len(p.tokens), col + len(p.source_tokens)
            return out
        if self.shown != "attention":
            return (self.explanations or {}).get(self.shown)
        return self.weights

    def attention_rows(self) -> np.ndarray | None:
        if self.sentences is None:
            return super().attention_rows()
        return self.shown_weights() if self.shown == "attention" else None

    def figure(self):
        """The alignment heatmap (target tokens down, source tokens across; an input of
        several sentences: their blocks on the diagonal)."""
        from attnkit.viz.heatmap import alignment_figure

        weights = self.shown_weights()
        if weights is None:
            raise UsageError(f"no attention weights for {self.source!r}: the model has none "
                             "(attention='none'), or they were not kept (CTranslate2 engine)")
        if not self.tokens:
            raise UsageError(f"the translation of {self.source!r} is empty: nothing to plot")
        title = self.source if self.shown == "attention" else f"{self.source} ({self.shown})"
        return alignment_figure(weights, self.source_tokens, self.tokens, title=title)

    @classmethod
    def page(cls, predictions: Sequence[TranslationPrediction],
             summary: dict[str, Any]) -> str:
        """The translation explorer (`attnkit.viz.translation_page`): every layer and head
        when the predictions carry ``layer_weights``, else their ``weights``."""
        from attnkit.apps.translate.page import explorer_page

        return explorer_page(predictions, summary)

    def note(self) -> str | None:
        """One line on what the model could not read, or None when it read everything (or
        when `warning` says it)."""
        parts = []
        if self.unknown and not self.warning():
            parts.append(f"{self.unknown:.0%} of its tokens are unknown to the model")
        if self.truncated:
            cut = [p for p in self.sentences or [self] if p.truncated]
            parts.append(f"{self.truncated} tokens cut off after the first "
                         f"{len(cut[0].source_tokens)} (the model reads no more)"
                         + (f" in {len(cut)} of its {len(self.sentences)} sentences"
                            if self.sentences else ""))
        return "; ".join(parts) or None

    def warning(self) -> str | None:
        """One line when more than `UNKNOWN_WARNING` of the input's tokens are unknown to the
        run: its translation is then mostly a guess."""
        if self.unknown <= UNKNOWN_WARNING:
            return None
        return (f"{self.unknown:.0%} of its tokens are unknown to the run (more than "
                f"{UNKNOWN_WARNING:.0%}): the translation is mostly a guess; use a run trained "
                "on text like it")


def most_reordered(predictions: Sequence[TranslationPrediction]) -> TranslationPrediction:
    """The prediction whose attention crosses most (inversions of the per-row argmax): the
    heatmap that shows re-ordering, rather than a plain diagonal."""
    def crossings(p: TranslationPrediction) -> int:
        peaks = p.weights.argmax(axis=1).tolist() if p.weights is not None else []
        return sum(a > b for i, a in enumerate(peaks) for b in peaks[i + 1:])
    return max(predictions, key=crossings)
