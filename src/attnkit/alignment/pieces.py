"""Sentence pairs as a translation model reads them, with every piece traced to its word.

`pair_pieces` writes a pair's whitespace tokens as the model's training text
(`attnkit.alignment.text.surface`), encodes it and records which token(s) each piece comes
from, so links between pieces go back to the tokens; `raw_pieces` does it for raw training
text (the aligner's labels); `unknown_words` says how much the vocabularies cannot read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from attnkit.alignment.text import Span, aligner_tokens, pieces_to_tokens, surface
from attnkit.data.text_codec import SRC_LANG, TGT_LANG, TextCodec
from attnkit.data.vocab import Vocab


class TranslatePipeline(Protocol):
    """What turns a translation run's text into its model's ids
    (`attnkit.apps.translate.pipeline.TranslatePipeline`): the codec, the two vocabularies
    and the longest source the model reads."""

    codec: TextCodec
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_source: int


@dataclass
class PairPieces:
    """One pair for forced decoding: the tokens links refer to, the model's ids (at most
    ``max_source`` each), each piece's token indices (``*_owner``), and the tokens left without
    a piece (``cut``)."""

    src_tokens: list[str]
    tgt_tokens: list[str]
    src_ids: list[int]
    tgt_ids: list[int]
    src_owner: list[list[int]]
    tgt_owner: list[list[int]]
    cut: int = 0


def _side(pipeline: TranslatePipeline, text: str, spans: Sequence[Span], lang: str,
          vocab) -> tuple[list[int], list[list[int]], int]:
    pieces, piece_spans = pipeline.codec.encode_with_spans(text, lang)
    pieces, piece_spans = pieces[:pipeline.max_source], piece_spans[:pipeline.max_source]
    owner = pieces_to_tokens(piece_spans, spans)
    kept = {k for words in owner for k in words}
    return vocab.encode(pieces), owner, len(spans) - len(kept)


def pieces_of(pipeline: TranslatePipeline, texts: tuple[str, str],
              spans: tuple[Sequence[Span], Sequence[Span]],
              tokens: tuple[list[str], list[str]],
              langs: tuple[str, str] = (SRC_LANG, TGT_LANG)) -> PairPieces:
    """A `PairPieces` from the model's two texts, each token's span in them, and the tokens."""
    src_ids, src_owner, src_cut = _side(pipeline, texts[0], spans[0], langs[0],
                                        pipeline.src_vocab)
    tgt_ids, tgt_owner, tgt_cut = _side(pipeline, texts[1], spans[1], langs[1],
                                        pipeline.tgt_vocab)
    return PairPieces(list(tokens[0]), list(tokens[1]), src_ids, tgt_ids, src_owner,
                      tgt_owner, src_cut + tgt_cut)


def pair_pieces(pipeline: TranslatePipeline, src_tokens: Sequence[str],
                tgt_tokens: Sequence[str], *, normalize: bool = True,
                langs: tuple[str, str] = (SRC_LANG, TGT_LANG)) -> PairPieces:
    """Whitespace tokens to align, as the model reads them: written as its training text
    (``normalize``; False joins them as they are); ``langs``: ``("fr", "en")`` for a reverse run."""
    texts, spans = [], []
    for tokens, lang in ((src_tokens, langs[0]), (tgt_tokens, langs[1])):
        if normalize:
            text, where = surface(tokens, lang)
        else:
            text, where, pos = " ".join(tokens), [], 0
            for tok in tokens:
                where.append((pos, pos + len(tok)))
                pos += len(tok) + 1
        texts.append(text)
        spans.append(where)
    return pieces_of(pipeline, (texts[0], texts[1]), (spans[0], spans[1]),
                     (list(src_tokens), list(tgt_tokens)), langs)


def raw_pieces(pipeline: TranslatePipeline, source: str, target: str) -> PairPieces:
    """A raw training pair, its tokens those of the aligner (`aligner_tokens`)."""
    src = aligner_tokens(source, SRC_LANG)
    tgt = aligner_tokens(target, TGT_LANG)
    return pieces_of(pipeline, (source, target), ([s for _, s in src], [s for _, s in tgt]),
                     ([w for w, _ in src], [w for w, _ in tgt]))


def unknown_words(pipeline: TranslatePipeline, sources: Sequence[Sequence[str]],
                  targets: Sequence[Sequence[str]], *, normalize: bool = True
                  ) -> tuple[float, float]:
    """The share of the source words and of the target words of sentence pairs that the run's
    vocabularies do not hold (a word with an ``<unk>`` piece; words beyond what the model
    reads are not counted): where it is high the model cannot read the text, and its links
    are little better than guesses. Tokenization only: cheap beside aligning."""
    pairs = [pair_pieces(pipeline, s, t, normalize=normalize)
             for s, t in zip(sources, targets, strict=True)]
    shares = []
    for side, vocab in (("src", pipeline.src_vocab), ("tgt", pipeline.tgt_vocab)):
        seen = unknown = 0
        for pair in pairs:
            words: dict[int, bool] = {}
            for piece, owners in zip(getattr(pair, f"{side}_ids"), getattr(pair, f"{side}_owner"),
                                     strict=True):
                for w in owners:
                    words[w] = words.get(w, False) or piece == vocab.unk_id
            seen, unknown = seen + len(words), unknown + sum(words.values())
        shares.append(unknown / seen if seen else 0.0)
    return shares[0], shares[1]
