"""One translated sentence with its attention: what the translate app's ``predict`` returns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnkit.alignment.links import word_scores
from attnkit.apps.prediction import Prediction, rounded
from attnkit.data.subword import join_pieces
from attnkit.errors import UsageError

# Above this share of unknown source words, predict warns that the run cannot read the input.
UNKNOWN_WARNING = 0.10
# An output that repeats one token this many times in a row (or a sequence of two or three
# tokens `LOOP_REPEATS` times), where its source does not, is a decoder stuck in a loop.
TOKEN_REPEATS, LOOP_REPEATS = 4, 3
# Below this mean probability per output token (the geometric mean, EOS included) the model
# is guessing: ordinary sentences of its training domain score far above it.
LOW_CONFIDENCE = 0.25


@dataclass
class Words:
    """A sentence's pieces as whole words (subword pieces joined, ``▁`` removed); ``src_owner``,
    ``tgt_owner``: for each piece, ``[its word's index]``.
    """

    source: list[str]
    target: list[str]
    src_owner: list[list[int]]
    tgt_owner: list[list[int]]

    def matrix(self, pieces: np.ndarray | None) -> np.ndarray | None:
        """``[..., pieces out, pieces in]`` attention as ``[..., words out, words in]``: a
        source word sums its pieces' weights, an output word's row is the mean of its pieces'
        (Clark et al. 2019); rows stay distributions. None stays None.
        """
        return None if pieces is None else word_scores(
            np.asarray(pieces, np.float64), self.tgt_owner, self.src_owner, len(self.target),
            len(self.source)).astype(np.float32)


def piece_words(source: Sequence[str], target: Sequence[str], subword: bool) -> Words:
    """A sentence's source and output tokens as `Words` (subword pieces joined)."""
    if not subword:
        return Words(list(source), list(target), [[k] for k in range(len(source))],
                     [[k] for k in range(len(target))])
    (src, src_owner), (tgt, tgt_owner) = join_pieces(source), join_pieces(target)
    return Words(src, tgt, src_owner, tgt_owner)


def repeated(tokens: Sequence[str], source: str) -> str | None:
    """The longest run of one to three tokens that ``tokens`` repeat back to back
    (`LOOP_REPEATS` times or more) where ``source`` does not, as ``"'i' 12 times"``; else None.
    """
    found: tuple[int, str] | None = None
    low = source.casefold()
    for n, least in ((1, TOKEN_REPEATS), (2, LOOP_REPEATS), (3, LOOP_REPEATS)):
        for start in range(len(tokens) - n * least + 1):
            unit = list(tokens[start:start + n])
            count = 1
            while tokens[start + count * n:start + (count + 1) * n] == unit:
                count += 1
            text = "".join(unit).replace("\u2581", " ").strip()
            if count >= least and (text * count).casefold() not in low and (
                    found is None or count * n > found[0]):
                found = (count * n, f"{text!r} {count} times")
    return None if found is None else found[1]


@dataclass
class TranslationPrediction(Prediction):
    """One translated sentence.

    Attributes:
        source_tokens: the tokens the model read (at most ``max_source``; unknown words ``<unk>``).
        tokens: output tokens (``<unk>`` replaced by the most attended source word when asked).
        weights: ``[len(tokens), len(source_tokens)]`` attention (a Transformer's last decoder
            layer, mean over heads); None for attention='none', CTranslate2, or not asked.
        score: log-probability of the output.
        unknown, unknown_words, word_count: share (0..1) and list of the source's words the run
            cannot read, of ``word_count`` words.
        subword: the tokens are subword pieces (shown as `words`).
        truncated: source tokens cut off after ``max_source`` (0: read whole).
        layer_weights: ``[layers, heads, len(tokens), len(source_tokens)]`` when
            ``attention="all"``; else None.
        explanations: other explanations by method (``"rollout"``, ``"grad-input"``,
            ``"integrated-gradients"``), each ``[len(tokens), len(source_tokens)]``, rows sum to 1.
        shown: the method a figure draws (``"attention"`` or the first of ``explanations``).
        why: how far attention can be trusted on this run (`page.translate_trust`), or None.
        alignment: word links ``(source word, output word)`` over ``source.split()`` and
            ``text.split()`` when ``alignments=True``; ``alignment_method`` says how.
        piece_links: ``alignment`` over ``source_tokens`` and ``tokens``, or None.
        sentences: for an input of several sentences, each one's prediction (`paragraph`); the
            input's ``weights`` are then None. None for one sentence.
    """

    source: str
    source_tokens: list[str]
    tokens: list[str]
    text: str
    weights: np.ndarray | None
    score: float
    unknown: float = 0.0
    truncated: int = 0
    unknown_words: list[str] = field(default_factory=list)
    word_count: int = 0
    subword: bool = False
    layer_weights: np.ndarray | None = None
    explanations: dict[str, np.ndarray] | None = None
    shown: str = "attention"
    why: str | None = None
    alignment: list[tuple[int, int]] | None = None
    alignment_method: str | None = None
    piece_links: list[tuple[int, int]] | None = None
    sentences: list[TranslationPrediction] | None = None

    @classmethod
    def paragraph(cls, source: str, parts: Sequence[TranslationPrediction],
                  text: str) -> TranslationPrediction:
        """The prediction of an input translated sentence by sentence: tokens end to end, the summed
        score, ``unknown`` over all words, ``truncated`` summed, no weights of its own.
        """
        words = sum(p.word_count for p in parts)
        unknown = [w for p in parts for w in p.unknown_words]
        return cls(source, [t for p in parts for t in p.source_tokens],
                   [t for p in parts for t in p.tokens], text, None,
                   sum(p.score for p in parts), len(unknown) / words if words else 0.0,
                   sum(p.truncated for p in parts), unknown, words, parts[0].subword,
                   shown=parts[0].shown, why=parts[0].why, sentences=list(parts))

    def words(self) -> Words:
        """This prediction's tokens as whole words (`Words`; an input of several sentences:
        its sentences' words end to end)."""
        if self.sentences is not None:
            out = Words([], [], [], [])
            for w in (p.words() for p in self.sentences):
                out.src_owner += [[k + len(out.source)] for [k] in w.src_owner]
                out.tgt_owner += [[k + len(out.target)] for [k] in w.tgt_owner]
                out.source += w.source
                out.target += w.target
            return out
        return piece_words(self.source_tokens, self.tokens, self.subword)

    def to_dict(self) -> dict[str, Any]:
        """The prediction in whole words (`words`): tokens, attention and explanations."""
        w = self.words()
        row = {"source": self.source, "text": self.text, "tokens": w.target,
               "source_tokens": w.source, "score": round(self.score, 6),
               "unknown": round(self.unknown, 4), "unknown_words": self.unknown_words,
               "truncated": self.truncated, "warning": self.warning(),
               "weights": rounded(w.matrix(self.weights), 4)}
        if self.layer_weights is not None:
            row["layer_weights"] = rounded(w.matrix(self.layer_weights), 4)
        if self.explanations:
            row["explanations"] = {k: rounded(w.matrix(v), 4) for k, v in self.explanations.items()}
        if self.alignment is not None:
            row["alignment"] = " ".join(f"{i}-{j}" for i, j in self.alignment)
            row["alignment_method"] = self.alignment_method
        if self.sentences is not None:
            row["sentences"] = [p.to_dict() for p in self.sentences]
        return row

    def text_line(self, **show: Any) -> str:
        return self.text

    def shown_weights(self) -> np.ndarray | None:
        """``[len(tokens), len(source_tokens)]``: the attention or the explanation `shown`; several
        sentences give their blocks on the diagonal (zero elsewhere). None when there are none.
        """
        if self.sentences is not None:
            blocks = [p.shown_weights() for p in self.sentences]
            if any(b is None for b in blocks):
                return None
            return torch.block_diag(*(torch.as_tensor(b, dtype=torch.float32)
                                      for b in blocks)).numpy()
        return (self.weights if self.shown == "attention"
                else (self.explanations or {}).get(self.shown))

    def figure(self):
        """The alignment heatmap in whole words (`words`: target words down, source words
        across; an input of several sentences: their blocks on the diagonal)."""
        from attnkit.viz.heatmap import alignment_figure

        weights, words = self.shown_weights(), self.words()
        if weights is None:
            raise UsageError(f"no attention weights for {self.source!r}: the model has none "
                             "(attention='none'), or they were not kept (CTranslate2 engine)")
        if not self.tokens:
            raise UsageError(f"the translation of {self.source!r} is empty: nothing to plot")
        title = self.source if self.shown == "attention" else f"{self.source} ({self.shown})"
        return alignment_figure(words.matrix(weights), words.source, words.target, title=title)

    @classmethod
    def page(cls, predictions: Sequence[TranslationPrediction], summary: dict[str, Any]) -> str:
        """The translation explorer (`attnkit.viz.translation_page`): every layer and head
        when the predictions carry ``layer_weights``, else their ``weights``."""
        from attnkit.apps.translate.page import predictions_page

        return predictions_page(predictions, summary)

    def note(self) -> str | None:
        """One line on what the model could not read, or None when it read everything (or
        when `warning` says it)."""
        parts = []
        if self.unknown_words and not self.warning():
            parts.append(self.unknown_line())
        if self.truncated:
            cut = [p for p in self.sentences or [self] if p.truncated]
            parts.append(f"{self.truncated} tokens cut off after the first "
                         f"{len(cut[0].source_tokens)} (the model reads no more)"
                         + (f" in {len(cut)} of its {len(self.sentences)} sentences"
                            if self.sentences else ""))
        return "; ".join(parts) or None

    def unknown_line(self) -> str:
        names = list(dict.fromkeys(self.unknown_words))
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        return (f"{len(self.unknown_words)} of the {self.word_count} words it read "
                f"{'is' if len(self.unknown_words) == 1 else 'are'} unknown to the run "
                f"({shown})")

    def doubts(self) -> list[str]:
        """What the output itself says against it, per sentence: a decoder stuck in a loop
        (`repeated`), else a mean probability below `LOW_CONFIDENCE`."""
        out = []
        parts = self.sentences or [self]
        for k, p in enumerate(parts, 1):
            where = f" (sentence {k})" if len(parts) > 1 else ""
            loop = repeated(p.tokens, p.source)
            # The mean probability per output token (the geometric mean, EOS counted).
            confidence = math.exp(p.score / (len(p.tokens) + 1))
            if loop:
                out.append(f"its output repeats {loop}{where}")
            elif p.tokens and confidence < LOW_CONFIDENCE:
                out.append(f"the model is unsure of its output{where} (a mean probability of "
                           f"{confidence:.2f} per token)")
        return out

    def warning(self) -> str | None:
        """One line when the run cannot read the input (over `UNKNOWN_WARNING` of its words unknown)
        or its output gives it away (`doubts`); else None.
        """
        parts = [self.unknown_line()] if self.unknown > UNKNOWN_WARNING else []
        doubts = self.doubts()
        if not parts and not doubts:
            return None
        verdict = "the translation is likely wrong" if doubts else "it can only guess them"
        return "; ".join(parts + doubts) + f": {verdict} (use a run trained on text like it)"


def most_reordered(predictions: Sequence[TranslationPrediction]) -> TranslationPrediction:
    """The prediction whose attention crosses most (inversions of the per-row argmax): the
    heatmap that shows re-ordering, rather than a plain diagonal."""
    def crossings(p: TranslationPrediction) -> int:
        peaks = p.weights.argmax(axis=1).tolist() if p.weights is not None else []
        return sum(a > b for i, a in enumerate(peaks) for b in peaks[i + 1:])
    return max(predictions, key=crossings)
