"""Review text -> the padded id tensors a sentiment classifier reads, and back to the text.

`TextPipeline` (a tokenizer, a vocabulary, ``maxlen``, padding and truncation sides):
`TextPipeline.read` says what the model sees of one review (kept tokens, ids, how many were
cut or unknown), reading any text in `CHUNK_CHARS` pieces so memory stays bounded;
``encode(texts)`` -> ``(ids [batch, maxlen] int64, lengths [batch])``; `TextPipeline.spans`
finds the kept tokens in the text as written."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.data.classification_text import check_padding, pad_sequences, tokenizer_from_json
from attnkit.data.imdb import Review
from attnkit.data.text_codec import CHUNK_CHARS, text_chunks
from attnkit.data.vocab import Vocab


@dataclass(frozen=True)
class ReadReview:
    """What the model sees of one review: the kept ``tokens`` (at most ``maxlen``, text order),
    their ``ids``, the tokens cut off by ``maxlen`` (``dropped``) and kept ones read as
    ``<unk>`` (``unknown``)."""

    tokens: list[str]
    ids: list[int]
    dropped: int
    unknown: int

    @property
    def unknown_share(self) -> float:
        """Share of the kept tokens that are unknown (0 for a review without tokens)."""
        return self.unknown / len(self.tokens) if self.tokens else 0.0


class EncodedReviews(torch.utils.data.TensorDataset):
    """Padded reviews as tensors: item ``i`` = ``(ids [maxlen], length [], label [])``."""

    def __init__(self, ids: Tensor, lengths: Tensor, labels: Tensor):
        super().__init__(ids, lengths, labels)
        self.ids, self.lengths, self.labels = ids, lengths, labels


def collate(items) -> tuple[Tensor, Tensor, Tensor]:
    """List of dataset items -> ``ids [batch, maxlen]``, ``lengths [batch]``, ``labels [batch]``."""
    return tuple(torch.stack(column) for column in zip(*items, strict=True))


@dataclass
class TextPipeline:
    """Text -> padded ids: a tokenizer (``tokenize(text)``, ``to_json()``), the vocabulary
    (``<pad>`` = 0, ``<unk>`` = 1), ``maxlen``, ``padding`` and ``truncating`` (`pad_sequences`)."""

    tokenizer: Any
    vocab: Vocab
    maxlen: int
    padding: str = "pre"
    truncating: str = "pre"

    def read(self, text: str) -> ReadReview:
        """The tokens of ``text`` the model sees (see `ReadReview`)."""
        keep_last = self.truncating == "pre"
        kept: collections.deque[str] = collections.deque(maxlen=self.maxlen if keep_last else None)
        total = 0
        for piece in text_chunks(text, CHUNK_CHARS):
            tokens = self.tokenizer.tokenize(piece)
            total += len(tokens)
            kept.extend(tokens if keep_last else tokens[:self.maxlen - len(kept)])
        tokens = list(kept)
        ids = self.vocab.encode(tokens)
        unk = self.vocab.unk_id
        return ReadReview(tokens, ids, total - len(tokens), sum(i == unk for i in ids))

    def encode(self, texts: Sequence[str]) -> tuple[Tensor, Tensor]:
        """``ids [batch, maxlen]`` int64 and ``lengths [batch]`` (see `pad_sequences`)."""
        return self.pad([self.read(t) for t in texts])

    def pad(self, reads: Sequence[ReadReview], width: int | None = None) -> tuple[Tensor, Tensor]:
        """Already read reviews -> ``ids [batch, width]`` (default ``maxlen``; a batch of
        short reviews may be cut to its longest), ``lengths [batch]``."""
        return pad_sequences([r.ids for r in reads], width or self.maxlen, padding=self.padding,
                             truncating=self.truncating)

    def tokens_in(self, n: int, width: int) -> slice:
        """Where the ``n`` tokens of a review sit in a padded row of ``width`` columns."""
        return slice(width - n, width) if self.padding == "pre" else slice(0, n)

    def dataset(self, reviews: Sequence[Review]) -> EncodedReviews:
        """Labelled reviews -> an `EncodedReviews` (labels as float32 0/1)."""
        ids, lengths = self.encode([r.text for r in reviews])
        return EncodedReviews(ids, lengths, torch.tensor([r.label for r in reviews],
                                                         dtype=torch.float32))

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``pipeline.json`` (the vocabulary is saved on its own)."""
        return {"tokenizer": self.tokenizer.to_json(), "maxlen": self.maxlen,
                "padding": self.padding, "truncating": self.truncating}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], vocab: Vocab, folder: str | Path) -> TextPipeline:
        """Rebuild from `to_dict` (``folder`` holds a subword model file); ValueError on a
        missing or malformed field (the caller names the file)."""
        if not isinstance(obj, dict):
            raise ValueError("must be a JSON object")
        missing = [k for k in ("tokenizer", "maxlen") if k not in obj]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        maxlen = obj["maxlen"]
        if not isinstance(maxlen, int) or isinstance(maxlen, bool):
            raise ValueError(f"maxlen must be a positive integer, got {maxlen!r}")
        padding, truncating = obj.get("padding", "pre"), obj.get("truncating", "pre")
        check_padding(maxlen, padding, truncating)
        if not isinstance(obj["tokenizer"], dict):
            raise ValueError("tokenizer must be a JSON object")
        return cls(tokenizer_from_json(obj["tokenizer"], folder), vocab, maxlen, padding,
                   truncating)
