"""Text -> integer sequences for classification: tokenizers, a frequency vocabulary, padding.

Three tokenizers share one interface (``tokenize(text) -> list[str]``, ``to_json()``):

* `WordTokenizer` - the classic Keras pipeline: lowercase, ``<br />`` removed, words are
  runs of characters that are neither whitespace nor Keras' default filter punctuation
  (so ``don't`` stays one word, as in ``keras.preprocessing.text.Tokenizer``).
* `CharTokenizer` - one token per non-space character; needs no word boundaries, so it
  works for Chinese or Japanese reviews.
* `SubwordTokenizer` - a sentencepiece unigram model trained on the training texts.

`build_vocab` keeps the ``num_words`` most frequent training tokens in a
`Vocab` (id 0 = ``<pad>``, id 1 = ``<unk>``, then tokens by
decreasing frequency), and `pad_sequences` pads/truncates like
``keras.utils.pad_sequences``.

Example:
    ```python
    tok = WordTokenizer()
    vocab = build_vocab((tok.tokenize(t) for t in texts), num_words=30000)
    ids, lengths = pad_sequences([vocab.encode(tok.tokenize(t)) for t in texts], maxlen=100)
    # ids [batch, 100] int64 (padding at the start, Keras' default), lengths [batch]
    ```
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from attnkit.data.batching import pad_ids
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


class CharTokenizer:
    """One token per non-whitespace character after `clean_text`: ``"好 电影"`` -> 好 电 影"""

    kind = "char"

    def tokenize(self, text: str) -> list[str]:
        return [c for c in clean_text(text) if not c.isspace()]

    def to_json(self) -> dict:
        return {"kind": self.kind}


class SubwordTokenizer:
    """Sentencepiece pieces of the cleaned text (the ``subword`` extra), via
    `attnkit.data.subword.SubwordModel`.

    Args:
        model_path: a trained sentencepiece ``.model`` file (protobuf, not a pickle).
    """

    kind = "subword"

    def __init__(self, model_path: str | os.PathLike):
        from attnkit.data.subword import SubwordModel

        self.model_path = str(model_path)
        self._model = SubwordModel(model_path)

    @classmethod
    def train(cls, texts: Iterable[str], model_path: str | os.PathLike, *,
              vocab_size: int = 8000) -> SubwordTokenizer:
        """Train a unigram model on ``texts`` (cleaned like the word tokenizer) and write it."""
        from attnkit.data.subword import SubwordModel

        SubwordModel.train((clean_text(t) for t in texts), model_path, vocab_size=vocab_size,
                           character_coverage=0.9995)
        return cls(model_path)

    def tokenize(self, text: str) -> list[str]:
        return self._model.encode(clean_text(text))

    def to_json(self) -> dict:
        return {"kind": self.kind, "model": os.path.basename(self.model_path)}


def tokenizer_from_json(obj: dict, folder: str | os.PathLike | None = None):
    """Rebuild a tokenizer from `to_json`; ``folder`` holds a subword model file."""
    kind = obj.get("kind")
    if kind == "word":
        return WordTokenizer()
    if kind == "char":
        return CharTokenizer()
    if kind == "subword":
        return SubwordTokenizer(Path(folder or ".") / obj["model"])
    raise ValueError(f"unknown tokenizer kind {kind!r}; expected 'word', 'char' or 'subword'")


def make_tokenizer(kind: str, train_texts: Sequence[str] = (), folder: str | os.PathLike = ".",
                   subword_vocab_size: int = 8000):
    """``kind`` in word | char | subword (subword trains on ``train_texts`` into ``folder``)."""
    if kind == "word":
        return WordTokenizer()
    if kind == "char":
        return CharTokenizer()
    if kind == "subword":
        return SubwordTokenizer.train(train_texts, Path(folder) / "subword.model",
                                      vocab_size=subword_vocab_size)
    raise ValueError(f"tokenizer must be 'word', 'char' or 'subword', got {kind!r}")


def build_vocab(tokenized: Iterable[Sequence[str]], num_words: int) -> Vocab:
    """The ``num_words`` most frequent tokens, specials included: ``<pad>`` = 0, ``<unk>`` = 1.

    Ties in frequency are broken by the token string (see `Vocab.build`), so every id is
    ``< num_words`` and an ``Embedding(num_words, dim)`` covers them, as with Keras' ``num_words``.
    """
    if num_words < 2:
        raise ValueError(f"num_words must be >= 2 (padding and unknown), got {num_words}")
    return Vocab.build(tokenized, max_size=num_words, specials=SPECIALS)


def pad_sequences(sequences: Sequence[Sequence[int]], maxlen: int, *, padding: str = "pre",
                  truncating: str = "pre", value: int = PAD_ID) -> tuple[Tensor, Tensor]:
    """Pad or truncate id lists to ``maxlen``, like ``keras.utils.pad_sequences``.

    Args:
        sequences: ``batch`` lists of ints.
        maxlen: the output time length.
        padding: ``"pre"`` (Keras default: padding before the tokens) or ``"post"``.
        truncating: ``"pre"`` (Keras default: keep the LAST ``maxlen`` tokens) or ``"post"``.
        value: the padding id.

    Returns:
        ``ids [batch, maxlen]`` int64 and ``lengths [batch]`` int64 (real tokens per row). With
        ``padding="pre"`` the real tokens of row ``b`` sit at ``maxlen - lengths[b] ..``; with
        ``"post"`` at ``0 .. lengths[b]-1``.
    """
    if padding not in ("pre", "post") or truncating not in ("pre", "post"):
        raise ValueError(f"padding and truncating must be 'pre' or 'post', got {padding!r}, "
                         f"{truncating!r}")
    if maxlen < 1:
        raise ValueError(f"maxlen must be >= 1, got {maxlen}")
    kept = [list(s)[-maxlen:] if truncating == "pre" else list(s)[:maxlen] for s in sequences]
    return (pad_ids(kept, value, width=maxlen, side=padding),
            torch.tensor([len(s) for s in kept], dtype=torch.long))
