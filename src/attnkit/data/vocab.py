"""``Vocab``: the token <-> index table (the classic ``LanguageIndex``), saved as JSON.

Special tokens come first, in the order given, so ``<pad>`` is index 0 with the default
specials (padding rows are then all zeros). The sentiment app uses ``("<pad>", "<unk>")``."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from attnkit.data.drops import parse_json
from attnkit.errors import DataError
from attnkit.fileio import atomic_write_text

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
DEFAULT_SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK)
_FORMAT = "attnkit.vocab"
_VERSION = 1


class Vocab:
    """Bidirectional token/index table: ``tokens`` in index order, starting with ``specials``
    (default ``<pad> <bos> <eos> <unk>``), no duplicates. Unknown tokens encode to ``<unk>``
    when there is one, else `encode` raises."""

    def __init__(self, tokens: Sequence[str], specials: Sequence[str] = DEFAULT_SPECIALS):
        tokens = list(tokens)
        specials = tuple(specials)
        if tuple(tokens[: len(specials)]) != specials:
            raise ValueError(f"the first tokens must be the specials {list(specials)}, "
                             f"got {tokens[: len(specials)]}")
        self.itos, self.specials, self.stoi = tokens, specials, {}
        for i, tok in enumerate(tokens):
            if not isinstance(tok, str):
                raise ValueError(f"token {i} is not a string: {tok!r}")
            if tok in self.stoi:
                raise ValueError(f"duplicate token {tok!r} at indices {self.stoi[tok]} and {i}")
            self.stoi[tok] = i

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, sentences: Iterable[Iterable[str]], *, min_freq: int = 1,
              max_size: int | None = None, specials: Sequence[str] = DEFAULT_SPECIALS) -> Vocab:
        """Build from tokenized sentences: tokens seen ``min_freq`` times, the most frequent up to
        ``max_size`` *including* the specials; ties broken by the token string, so the result does
        not depend on the data's order."""
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        specials = tuple(specials)
        if max_size is not None and max_size < len(specials):
            raise ValueError(f"max_size must be >= the {len(specials)} specials, got {max_size}")
        counts: Counter[str] = Counter()
        for sentence in sentences:
            if isinstance(sentence, str):
                raise ValueError("sentences must be token sequences, got a plain string")
            counts.update(sentence)
        ranked = sorted((tok for tok, c in counts.items() if c >= min_freq
                         and tok not in specials), key=lambda tok: (-counts[tok], tok))
        if max_size is not None:
            ranked = ranked[: max_size - len(specials)]
        return cls(list(specials) + ranked, specials)

    # ------------------------------------------------------------------ lookups
    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return self.itos == other.itos and self.specials == other.specials

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, specials={list(self.specials)})"

    def special_id(self, token: str) -> int:
        """Index of a special token; ValueError if this vocabulary has no such special."""
        if token not in self.specials:
            raise ValueError(f"this vocabulary has no {token} (specials: {list(self.specials)})")
        return self.stoi[token]

    # The ids of the four specials (ValueError for one this vocabulary does not have).
    pad_id = property(lambda self: self.special_id(PAD))
    bos_id = property(lambda self: self.special_id(BOS))
    eos_id = property(lambda self: self.special_id(EOS))
    unk_id = property(lambda self: self.special_id(UNK))

    # ------------------------------------------------------------------ encode / decode
    def encode(self, tokens: Iterable[str], add_bos: bool = False,
               add_eos: bool = False) -> list[int]:
        """Tokens -> ids; unknown tokens -> ``<unk>``; optional ``<bos>`` / ``<eos>`` around."""
        unk = self.stoi.get(UNK) if UNK in self.specials else None
        ids = [self.bos_id] if add_bos else []
        for tok in tokens:
            idx = self.stoi.get(tok, unk)
            if idx is None:
                raise ValueError(f"unknown token {tok!r} and this vocabulary has no {UNK}")
            ids.append(idx)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Ids (ints or a 1-D tensor) -> tokens; ``strip_specials`` stops at the first ``<eos>`` and
        drops ``<pad>`` / ``<bos>`` (``<unk>`` is content: kept)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        eos = self.stoi.get(EOS) if EOS in self.specials else None
        drop = {self.stoi[t] for t in (PAD, BOS) if t in self.specials}
        out = []
        for raw in ids:
            i = int(raw)
            if not 0 <= i < len(self.itos):
                raise ValueError(f"id {i} out of range for a vocabulary of size {len(self.itos)}")
            if strip_specials and i == eos:
                break
            if not (strip_specials and i in drop):
                out.append(self.itos[i])
        return out

    # ------------------------------------------------------------------ persistence
    def to_json(self, path: str | os.PathLike) -> None:
        """Write ``{"format", "version", "specials", "tokens"}`` atomically (temp file + rename)."""
        payload = {"format": _FORMAT, "version": _VERSION, "specials": list(self.specials),
                   "tokens": self.itos}
        atomic_write_text(path, json.dumps(payload, ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> Vocab:
        """Read a file written by `to_json`; DataError naming the file if it is malformed."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise DataError("vocabulary file not found", path=str(path)) from exc
        except UnicodeDecodeError as exc:
            raise DataError(f"vocabulary file is not UTF-8: {exc}", path=str(path)) from exc
        payload = parse_json(text, path=str(path))
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise DataError(f"not an attnkit vocabulary (format != {_FORMAT!r})", path=str(path))
        if payload.get("version") != _VERSION:
            raise DataError(f"unsupported vocabulary version {payload.get('version')!r} "
                            f"(expected {_VERSION})", path=str(path))
        tokens, specials = payload.get("tokens"), payload.get("specials")
        for name, value in (("tokens", tokens), ("specials", specials)):
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise DataError(f"{name!r} must be a list of strings", path=str(path))
        try:
            return cls(tokens, specials)
        except ValueError as exc:  # duplicates / missing specials, reported with the file
            raise DataError(str(exc), path=str(path)) from exc
