"""Optional subword tokenization with sentencepiece (``pip install attnkit[subword]``).

`SubwordModel.train` writes a unigram or BPE model (joint, or one per language) into the run
folder; its pieces then go through `attnkit.data.vocab.Vocab` like words. The model file is
the only state: ``SubwordModel(path)`` loads it again."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from attnkit.errors import DataError
from attnkit.fileio import atomic_write_bytes

MARK = "\u2581"   # sentencepiece's word start


def join_pieces(pieces: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """Pieces as the words they spell (a ``▁`` piece starts a word, any other continues one) ->
    ``(words, owner)``, each piece's word index as ``[k]``, e.g.
    ``["▁L", "'", "homme", "▁arrive"]`` -> ``(["L'homme", "arrive"], [[0], [0], [0], [1]])``."""
    words: list[str] = []
    owner: list[list[int]] = []
    for k, piece in enumerate(pieces):
        text = piece.replace(MARK, "")
        if not words or (piece.startswith(MARK) and (text or k < len(pieces) - 1)):
            words.append(text)
        else:
            words[-1] += text
        owner.append([len(words) - 1])
    return words, owner


def _spm():
    try:
        import sentencepiece
    except ImportError as exc:  # optional dependency
        raise ImportError("subword tokenization needs sentencepiece: "
                          "pip install 'attnkit[subword]'") from exc
    return sentencepiece


class SubwordModel:
    """A trained sentencepiece model (the ``.model`` file written by `train`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError("sentencepiece model file not found", path=str(self.path))
        self._sp = _spm().SentencePieceProcessor()
        try:
            self._sp.Load(str(self.path))
        except (OSError, RuntimeError) as exc:
            raise DataError(f"not a sentencepiece model: {exc}", path=str(self.path)) from exc

    @classmethod
    def train(cls, texts: Iterable[str], path: str | os.PathLike, *, vocab_size: int = 8000,
              model_type: str = "unigram", character_coverage: float = 1.0,
              seed_sentencepiece_size: int = 100000) -> SubwordModel:
        """Train on ``texts`` (both languages for a joint model) and write the model to ``path``
        atomically; ``vocab_size`` is an upper bound (small corpora give fewer pieces)."""
        if model_type not in ("unigram", "bpe"):
            raise ValueError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
        buffer = io.BytesIO()
        try:
            _spm().SentencePieceTrainer.train(
                sentence_iterator=iter(t for t in texts if t.strip()), model_writer=buffer,
                vocab_size=vocab_size, model_type=model_type, character_coverage=character_coverage,
                seed_sentencepiece_size=seed_sentencepiece_size,
                hard_vocab_limit=False,  # small corpora: fewer pieces instead of an error
                # attnkit's Vocab owns <pad>/<bos>/<eos>; sentencepiece keeps only <unk>.
                unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, minloglevel=2)
        except RuntimeError as exc:
            raise ValueError(f"sentencepiece training failed: {exc}") from exc
        atomic_write_bytes(path, buffer.getvalue())
        return cls(path)

    def __len__(self) -> int:
        return self._sp.GetPieceSize()

    def encode(self, text: str) -> list[str]:
        """Text -> pieces (strings, ``▁`` marks a word start)."""
        return self._sp.EncodeAsPieces(text)

    def decode(self, pieces: Sequence[str]) -> str:
        """Pieces -> text (exact inverse of `encode` on normalised text)."""
        return self._sp.DecodePieces(list(pieces))
