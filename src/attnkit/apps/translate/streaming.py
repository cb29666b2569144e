"""Translation token by token (``POST /v1/translate/stream``): `stream_texts` turns each step
of greedy decoding into a `StreamStep` (each word with its attention row, each sentence's whole
`TranslationPrediction` when it ends). Beam search cannot stream: its best is known at the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from attnkit.apps.translate.engines import AttnkitEngine, text_sentences
from attnkit.apps.translate.prediction import TranslationPrediction, piece_words
from attnkit.decoding import Hypothesis, greedy_steps, padded_sources


@dataclass
class StreamedToken:
    """One output word as greedy decoding chose it: its text (``sentence``), which sentence of
    it (``part``), its index in that sentence's output words, the word (pieces joined, ``<unk>``
    replaced when asked), and its ``[len(source words)]`` attention (as
    `TranslationPrediction.words` gathers it; None when not asked or the model has none)."""

    sentence: int
    position: int
    token: str
    weights: np.ndarray | None
    part: int = 0

    def event(self) -> dict:
        """The token as the API sends it (weights rounded to 4 decimals)."""
        return {"sentence": self.part, "index": self.position, "token": self.token,
                "weights": None if self.weights is None else
                [round(float(w), 4) for w in self.weights]}


@dataclass
class SentenceStart:
    """The start of sentence ``sentence`` of a streamed text, and the words its rows are over."""

    sentence: int
    source: str
    source_tokens: list[str]

    def event(self) -> dict:
        return asdict(self)


@dataclass
class StreamStep:
    """What one decoder step produced, by text: the words completed (with subwords, two when a
    sentence ends), the texts that ended with their prediction, a `SentenceStart` per text
    whose next sentence starts."""

    tokens: list[StreamedToken] = field(default_factory=list)
    finished: dict[int, TranslationPrediction] = field(default_factory=dict)
    sources: dict[int, Any] = field(default_factory=dict)


def stream_texts(engine: AttnkitEngine, texts: Sequence[str], *, split: bool = True,
                 attention: bool | str = True, unk_replace: bool = True) -> Iterator[StreamStep]:
    """Greedy translation of ``texts``, sentence after sentence (``split=False``: a text is one
    sentence), one `StreamStep` per step; a text's final prediction equals
    ``translate_texts(engine, [...], beam=1)``'s. UsageError (here): a text without any token.
    """
    cuts = [text_sentences(engine, t, i) if split else None for i, t in enumerate(texts, 1)]
    pieces = [[t] if c is None else c.sentences for t, c in zip(texts, cuts, strict=True)]
    encoded, attention = engine.read([s for p in pieces for s in p], attention)
    return _rounds(engine, list(texts), cuts, pieces, encoded, attention, unk_replace)


def _rounds(engine: AttnkitEngine, texts: list[str], cuts: list, pieces: list[list[str]],
            encoded: list, attention: bool | str, unk_replace: bool) -> Iterator[StreamStep]:
    """Round ``r`` decodes the ``r``-th sentence of every text that has one, as one batch:
    a client reads its text in order, and texts of one sentence end in the first round."""
    offsets = list(itertools.accumulate([0, *map(len, pieces)]))
    parts: list[list[TranslationPrediction]] = [[] for _ in texts]
    for r in range(max(map(len, pieces), default=0)):
        rows = [i for i, p in enumerate(pieces) if r < len(p)]
        for step in _steps(engine, [pieces[i][r] for i in rows],
                           [encoded[offsets[i] + r] for i in rows], attention, unk_replace):
            for t in step.tokens:
                t.sentence, t.part = rows[t.sentence], r
            out = StreamStep(step.tokens, sources={
                rows[b]: SentenceStart(r, pieces[rows[b]][r], words)
                for b, words in step.sources.items()})
            for b, pred in step.finished.items():
                i = rows[b]
                parts[i].append(pred)
                if len(parts[i]) == len(pieces[i]):
                    out.finished[i] = pred if cuts[i] is None else TranslationPrediction.paragraph(
                        texts[i], parts[i], cuts[i].join([p.text for p in parts[i]]))
            yield out


def _steps(engine: AttnkitEngine, sentences: list[str],
           encoded: list[tuple[list[str], list[int], int]], attention: bool | str,
           unk_replace: bool) -> Iterator[StreamStep]:
    """One batch decoded greedily, step by step: each sentence's output so far read as
    `AttnkitEngine.output` reads a whole one, its words sent as they complete (a subword piece
    waits until the next one starts a new word, or the sentence ends), with their rows over
    the source words as `TranslationPrediction.words` gathers them."""
    eos, subword, keep = (engine.pipeline.tgt_vocab.eos_id,
                          engine.pipeline.codec.subword is not None, bool(attention))
    need = (attention if attention == "all" else bool(attention or unk_replace)
            ) if engine.has_attention else False
    model = engine.decoder(len(sentences), need)
    src, src_len = padded_sources([ids for _, ids, _ in encoded], model.config.pad_id,
                                  next(model.parameters()).device)
    ids, rows = [[] for _ in sentences], [[] for _ in sentences]   # so far, by sentence
    scores, sent = [0.0] * len(sentences), [0] * len(sentences)
    # greedy_steps runs each model call under no_grad by itself: no context is held across a
    # yield, so a server may advance several streams in turn on one thread.
    for n, step in enumerate(greedy_steps(model, src, src_len, need_weights=need)):
        weights = None if step.weights is None else step.weights.float().cpu()
        out = StreamStep()
        for k, (b, tok, lp, done) in enumerate(zip(step.rows.tolist(), step.tokens,
                                                   step.log_probs, step.done, strict=True)):
            source = encoded[b][0]
            scores[b] += lp
            if tok != eos:
                ids[b].append(tok)
                if weights is not None:
                    rows[b].append(weights[k, ..., : len(source)])
            # [T, ..., S] as greedy_decode gives them ([0, ..., S] for an empty output)
            stacked = None if weights is None else torch.stack(rows[b]) if rows[b] else \
                weights.new_zeros((0, *weights.shape[1:-1], len(source)))
            hyp = Hypothesis(list(ids[b]), stacked, scores[b], tok == eos)
            tokens, attn, _ = engine.output(hyp, source, unk_replace)
            words = piece_words(source, tokens, subword)
            if n == 0:
                out.sources[b] = words.source
            ready = len(words.target) - (0 if done or not subword else 1)
            matrix = words.matrix(None if attn is None or not keep or ready <= sent[b]
                                  else attn.numpy())
            out.tokens += [StreamedToken(b, j, words.target[j],
                                         None if matrix is None else matrix[j])
                           for j in range(sent[b], ready)]
            sent[b] = max(sent[b], ready)
            if done:
                out.finished[b] = engine.prediction(sentences[b], encoded[b], hyp,
                                                    unk_replace, keep)
        yield out
