"""Translation token by token (``POST /v1/translate/stream``): each output word with its
attention row the moment greedy decoding chooses it, and each sentence's whole
`TranslationPrediction` the step it ends. `stream_texts` cuts texts into sentences and turns
each step of `attnkit.decoding.greedy_steps` into a `StreamStep`, ending each text with what
``predict`` returns with ``beam=1``. Beam search cannot stream: its best is known at the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnkit.apps.translate.engines import AttnkitEngine, text_sentences
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.data.subword import MARK, join_pieces
from attnkit.data.vocab import UNK
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


@dataclass
class _Growing:
    """One sentence's output so far, and the pieces of its word not yet sent."""

    ids: list[int] = field(default_factory=list)
    rows: list[Tensor] = field(default_factory=list)
    score: float = 0.0
    shown: int = 0
    pending: list[tuple[str, Tensor | None]] = field(default_factory=list)


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
            out = StreamStep(sources={rows[b]: SentenceStart(r, pieces[rows[b]][r], tokens)
                                      for b, tokens in step.sources.items()})
            for t in step.tokens:
                t.sentence, t.part = rows[t.sentence], r
                out.tokens.append(t)
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
    vocab = engine.pipeline.tgt_vocab
    need = attention if attention == "all" else bool(attention or unk_replace)
    need = need if engine.has_attention else False
    model = engine.decoder(len(sentences), need)
    keep = bool(attention)
    eos, skip = vocab.eos_id, {vocab.pad_id, vocab.bos_id}
    device = next(model.parameters()).device
    src, src_len = padded_sources([ids for _, ids, _ in encoded], model.config.pad_id, device)
    growing, first = [_Growing() for _ in sentences], True
    # Tokens are sent as whole words: a subword piece waits until the next piece starts a new
    # word (or the sentence ends), then its word goes out with its row over the source words.
    subword = engine.pipeline.codec.subword is not None
    words = [_source_words(enc[0], subword) for enc in encoded]
    # greedy_steps runs each model call under no_grad by itself: no context is held across a
    # yield, so a server may advance several streams in turn on one thread.
    for step in greedy_steps(model, src, src_len, need_weights=need):
        rows = None if step.weights is None else step.weights.float().cpu()
        out = StreamStep()
        if first:
            out.sources, first = {i: w[0] for i, w in enumerate(words)}, False
        for k, (b, tok, lp, done) in enumerate(zip(step.rows.tolist(), step.tokens,
                                                   step.log_probs, step.done, strict=True)):
            g, source_tokens = growing[b], encoded[b][0]
            g.score += lp
            if tok != eos:
                row = None if rows is None else rows[k, ..., : len(source_tokens)]
                g.ids.append(tok)
                if row is not None:
                    g.rows.append(row)
                if tok not in skip:
                    piece, flat = _piece(vocab.itos[tok], row, source_tokens, unk_replace)
                    if g.pending and piece.startswith(MARK):
                        out.tokens.append(_word(b, g, words[b][1], keep))
                    g.pending.append((piece, flat))
                    if not subword:   # a word run's token is a word
                        out.tokens.append(_word(b, g, words[b][1], keep))
            if done and g.pending:
                out.tokens.append(_word(b, g, words[b][1], keep))
            if done:
                hyp = Hypothesis(g.ids, _stacked(g.rows, rows, len(source_tokens)),
                                 g.score, tok == eos)
                out.finished[b] = engine.prediction(sentences[b], encoded[b], hyp,
                                                    unk_replace, keep)
        yield out


def _source_words(tokens: list[str], subword: bool) -> tuple[list[str], np.ndarray]:
    """A sentence's source words and ``[pieces, words]``: which word each piece belongs to."""
    words, owner = join_pieces(tokens) if subword else (tokens, [[k] for k in range(len(tokens))])
    return list(words), np.eye(len(words), dtype=np.float32)[[k for [k] in owner]]


def _piece(piece: str, row: Tensor | None, source_tokens: list[str],
           unk_replace: bool) -> tuple[str, Tensor | None]:
    """An output piece (``<unk>`` replaced by the most attended source piece when asked) and
    its row over the source pieces (a Transformer's last layer, averaged over heads)."""
    flat = None
    if row is not None:
        flat = row[-1].mean(dim=0) if row.dim() == 3 else row  # [layers, heads, S]: the last
    if unk_replace and piece == UNK and flat is not None and source_tokens:
        piece = source_tokens[int(flat.argmax())]
    return piece, flat


def _word(sentence: int, g: _Growing, gather: np.ndarray, keep: bool) -> StreamedToken:
    """The word of ``g``'s pending pieces: their text joined, the mean of their rows summed
    over the pieces of each source word (as `TranslationPrediction.words` gathers them)."""
    text = "".join(p for p, _ in g.pending).replace(MARK, "")
    rows = [r for _, r in g.pending if r is not None]
    weights = None
    if rows and keep:
        weights = torch.stack(rows).mean(dim=0).numpy() @ gather
    g.pending = []
    g.shown += 1
    return StreamedToken(sentence, g.shown - 1, text, weights)


def _stacked(rows: list[Tensor], step_rows: Tensor | None, width: int) -> Tensor | None:
    """A sentence's rows as ``[T, ..., S]`` (``[0, ..., S]`` for an empty output), as
    `greedy_decode` gives them; None without attention."""
    if rows:
        return torch.stack(rows)
    if step_rows is None:
        return None
    return step_rows.new_zeros((0, *step_rows.shape[1:-1], width))
