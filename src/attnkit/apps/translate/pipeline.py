"""What turns text into a translation run's model ids and back (`TranslatePipeline`), and how
a run's files give it (`run_pipeline`: its vocabularies, checked against the sizes and sha256
``config.json`` records, and a ``--subword`` run's ``subword.model`` and training words). A
source longer than `TranslatePipeline.max_source` is cut."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnkit.apps.run_files import read_model_config, read_vocab, run_file
from attnkit.apps.translate.settings import ModelConfig
from attnkit.data.subword import SubwordModel
from attnkit.data.text import words_of
from attnkit.data.text_codec import SRC_LANG, TextCodec
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.fileio import MAX_VOCAB_BYTES
from attnkit.models.config import TransformerConfig, config_from_dict

APP = "translate"

VOCAB_FILES = {"src": "vocab_src.json", "tgt": "vocab_tgt.json"}
SUBWORD_FILE = "subword.model"   # the joint sentencepiece model of a --subword run
WORDS_FILE = "words_src.json"    # a --subword run's English training words (a Vocab)
MAX_WORDS = 200_000              # the most frequent training words kept in WORDS_FILE
RNN_MAX_SOURCE = 512
# The sizes of a translation model (checked before anything is allocated from config.json).
MODEL_SIZES = ("src_vocab", "tgt_vocab", "emb_dim", "hidden", "layers", "d_model", "heads",
               "ff_dim", "max_len")


@dataclass
class TranslatePipeline:
    """What turns text into a run's model ids and back: words or the run's subword ``codec``, the
    vocabularies (one joint with subwords), the longest source read (``max_source``), and a
    subword run's casefolded English training words (``known_words``; None for a word run).
    """

    codec: TextCodec
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_source: int
    known_words: Vocab | None = None


def source_limit(config: ModelConfig) -> int:
    """The longest source the model reads: a Transformer's positional table, else 512."""
    return config.max_len if isinstance(config, TransformerConfig) else RNN_MAX_SOURCE


def vocab_digest(vocab: Vocab) -> str:
    """The sha256 of a vocabulary's tokens (recorded in ``config.json``)."""
    return hashlib.sha256(json.dumps(vocab.itos, ensure_ascii=False).encode()).hexdigest()


def run_model_config(run: Path, config: dict[str, Any]) -> ModelConfig:
    """The model config of a run's ``config.json``, its sizes checked; CheckpointError."""
    missing = [key for key in ("model", "data") if not isinstance(config.get(key), dict)]
    if missing:
        raise CheckpointError(f"{run / 'config.json'}: no {' or '.join(missing)} settings")
    return read_model_config(run, config_from_dict, MODEL_SIZES, stored=config["model"],
                             what="a translation model config")


def run_pipeline(run: Path, config: dict[str, Any], model_config: ModelConfig) -> TranslatePipeline:
    """The pipeline of a trained run (or an export), from its files. CheckpointError: a file
    missing, or a vocabulary not the one the weights were trained with (``config``'s sizes and
    digests)."""
    vocabs = []
    for side in ("src", "tgt"):
        vocab = read_vocab(run, VOCAB_FILES[side])
        want = config.get("vocab", {}).get(side, {})
        size = config["model"][f"{side}_vocab"]
        if len(vocab) != size or want.get("sha256") not in (None, vocab_digest(vocab)):
            raise CheckpointError(
                f"{run / VOCAB_FILES[side]}: this vocabulary ({len(vocab)} tokens) does not match "
                f"the one the run's weights were trained with ({size} tokens, sha256 "
                f"{str(want.get('sha256'))[:12]}...); restore the run's original vocabulary")
        vocabs.append(vocab)
    codec, known = TextCodec(), None
    if config.get("options", {}).get("subword"):
        path = run_file(run, SUBWORD_FILE, "the run's sentencepiece model", limit=MAX_VOCAB_BYTES)
        try:
            codec = TextCodec(SubwordModel(path))
        except DataError as exc:
            raise CheckpointError(str(exc)) from None
        if os.path.lexists(run / WORDS_FILE):
            known = read_vocab(run, WORDS_FILE)
    return TranslatePipeline(codec, *vocabs, source_limit(model_config), known)


def training_words(sources: Iterable[str]) -> Vocab:
    """The words of English training sentences (`words_of`), the `MAX_WORDS` most frequent."""
    return Vocab.build((words_of(text, SRC_LANG) for text in sources), max_size=MAX_WORDS)


def reading(pipeline: TranslatePipeline, tokens: Sequence[str],
            ids: Sequence[int]) -> dict[str, Any]:
    """A `TranslationPrediction`'s fields on what the run read of its source: its words and
    those it cannot read (a word run's ``<unk>`` words; a subword run's words not in
    `TranslatePipeline.known_words`, without that list its ``<unk>`` pieces)."""
    unk = pipeline.src_vocab.unk_id
    if pipeline.codec.subword is None:
        words = [(t, i) for t, i in zip(tokens, ids, strict=True) if any(c.isalpha() for c in t)]
        count, unknown = len(words), [t for t, i in words if i == unk]
    elif pipeline.known_words is None:
        count, unknown = len(ids), [t for t, i in zip(tokens, ids, strict=True) if i == unk]
    else:
        words = words_of(pipeline.codec.decode(tokens, SRC_LANG), SRC_LANG)
        count, unknown = len(words), [w for w in words if w not in pipeline.known_words]
    return {"unknown": len(unknown) / count if count else 0.0, "unknown_words": unknown,
            "word_count": count, "subword": pipeline.codec.subword is not None}


def encode_source(pipeline: TranslatePipeline, text: str,
                  index: int) -> tuple[list[str], list[int], int]:
    """``text`` as the model reads it: (tokens, ids, tokens cut after ``max_source``); UsageError:
    no token (``index`` names it).
    """
    tokens, cut = pipeline.codec.encode_capped(text, SRC_LANG, pipeline.max_source)
    if not tokens:
        raise UsageError(f"empty sentence (input {index}): nothing to translate")
    return tokens, pipeline.src_vocab.encode(tokens), cut
