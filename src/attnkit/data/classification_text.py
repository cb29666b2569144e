"""Text -> integer sequences for classification: tokenizers, a frequency vocabulary, padding.

Three tokenizers share ``tokenize(text) -> list[str]`` and ``to_json()``: `WordTokenizer` (the
Keras pipeline: lowercase, ``<br />`` removed, Keras' filter punctuation splits words, so
``don't`` stays one), `CharTokenizer` (one token per non-space character: Chinese, Japanese)
and `SubwordTokenizer` (sentencepiece). `build_vocab` keeps the ``num_words`` most frequent
tokens (``<pad>`` = 0, ``<unk>`` = 1); `pad_sequences` is ``keras.utils.pad_sequences``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from attnkit.data.batching import pad_ids
from attnkit.data.subword import SubwordModel
from attnkit.data.vocab import PAD, UNK, Vocab

SPECIALS = (PAD, UNK)
PAD_ID = 0

# Keras' Tokenizer default `filters`; each is treated as a separator, like whitespace.
KERAS_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
_WORD_RE = re.compile("[^\\s" + re.escape(KERAS_FILTERS) + "]+")
_BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_text(text: str) -> str:
    """Lowercase and replace HTML line breaks (``<br />``, ``<br>``) by spaces."""
    return _BR_RE.sub(" ", text).lower()


class WordTokenizer:
    """Keras-style words: ``"Great<br />film, isn't it?!"`` -> great, film, isn't, it."""

    kind = "word"

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(clean_text(text))

    def to_json(self) -> dict:
        return {"kind": self.kind}


class CharTokenizer(WordTokenizer):
    """One token per non-whitespace character after `clean_text`: ``"好 电影"`` -> 好 电 影"""

    kind = "char"

    def tokenize(self, text: str) -> list[str]:
        return [c for c in clean_text(text) if not c.isspace()]


class SubwordTokenizer:
    """Sentencepiece pieces of the cleaned text (the ``subword`` extra), from a ``.model``."""

    kind = "subword"

    def __init__(self, model_path: str | os.PathLike):
        self.model_path = str(model_path)
        self._model = SubwordModel(model_path)

    def tokenize(self, text: str) -> list[str]:
        return self._model.encode(clean_text(text))

    def to_json(self) -> dict:
        return {"kind": self.kind, "model": os.path.basename(self.model_path)}


def tokenizer_from_json(obj: dict, folder: str | os.PathLike | None = None):
    """Rebuild a tokenizer from `to_json`; ``folder`` holds a subword model file."""
    kind = obj.get("kind")
    if kind == "subword":
        return SubwordTokenizer(Path(folder or ".") / obj["model"])
    if kind not in ("word", "char"):
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected 'word', 'char' or 'subword'")
    return WordTokenizer() if kind == "word" else CharTokenizer()


def make_tokenizer(kind: str, train_texts: Sequence[str] = (), folder: str | os.PathLike = ".",
                   subword_vocab_size: int = 8000):
    """``kind`` in word | char | subword (a unigram model trained on ``train_texts``, cleaned
    like the word tokenizer, and written into ``folder``)."""
    if kind == "subword":
        path = Path(folder) / "subword.model"
        SubwordModel.train((clean_text(t) for t in train_texts), path,
                           vocab_size=subword_vocab_size, character_coverage=0.9995)
        return SubwordTokenizer(path)
    return tokenizer_from_json({"kind": kind})


def build_vocab(tokenized: Iterable[Sequence[str]], num_words: int) -> Vocab:
    """The ``num_words`` most frequent tokens, specials included (``<pad>`` = 0, ``<unk>`` = 1),
    ties broken by the token string: every id is ``< num_words``, as with Keras' ``num_words``."""
    return Vocab.build(tokenized, max_size=num_words, specials=SPECIALS)


def check_padding(maxlen: int, padding: str, truncating: str) -> None:
    """ValueError unless ``maxlen >= 1`` and both sides are ``"pre"`` or ``"post"``."""
    if padding not in ("pre", "post") or truncating not in ("pre", "post"):
        raise ValueError(f"padding and truncating must be 'pre' or 'post', got {padding!r}, "
                         f"{truncating!r}")
    if maxlen < 1:
        raise ValueError(f"maxlen must be >= 1, got {maxlen}")


def pad_sequences(sequences: Sequence[Sequence[int]], maxlen: int, *, padding: str = "pre",
                  truncating: str = "pre", value: int = PAD_ID) -> tuple[Tensor, Tensor]:
    """Pad or truncate id lists to ``maxlen``, like ``keras.utils.pad_sequences`` -> ``(ids
    [batch, maxlen] int64, lengths [batch] int64)``.

    ``padding``: ``"pre"`` (Keras' default: the real tokens of row ``b`` end the row) or
    ``"post"``; ``truncating``: ``"pre"`` (keep the LAST ``maxlen`` tokens) or ``"post"``."""
    check_padding(maxlen, padding, truncating)
    kept = [list(s)[-maxlen:] if truncating == "pre" else list(s)[:maxlen] for s in sequences]
    return (pad_ids(kept, value, width=maxlen, side=padding),
            torch.tensor([len(s) for s in kept], dtype=torch.long))
