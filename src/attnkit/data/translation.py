"""Translation examples: length filtering, a dataset of id sequences, and the padding collate.

Teacher forcing needs the target twice, shifted by one: the decoder reads ``<bos> y1 .. yn``
(``tgt_in``) and is trained to output ``y1 .. yn <eos>`` (``tgt_out``); both have ``n + 1``
positions, so ``tgt_lengths`` is ``len(y) + 1``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnkit.data.batching import pad_ids
from attnkit.data.drops import DropReport
from attnkit.data.vocab import Vocab

TokenPair = tuple[Sequence[str], Sequence[str]]


def filter_by_length(pairs_tokens: Sequence[TokenPair], max_len: int
                     ) -> tuple[list[TokenPair], DropReport]:
    """Keep pairs whose two sides are non-empty and at most ``max_len`` tokens -> ``(kept, drops)``,
    ``kept`` in input order, ``drops`` by reason."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    kept: list[TokenPair] = []
    drops = DropReport("pair")
    for s, t in pairs_tokens:
        if not s or not t:
            drops.add("with an empty side")
        elif len(s) > max_len or len(t) > max_len:
            drops.add(f"longer than {max_len} tokens")
        else:
            kept.append((s, t))
    return kept, drops


class TranslationDataset:
    """Indexable ``(src_ids, tgt_ids)`` examples, plain int lists (targets without ``<bos>`` /
    ``<eos>``: the collate adds them)."""

    def __init__(self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]):
        if len(src_ids) != len(tgt_ids):
            raise ValueError(f"src_ids and tgt_ids must have the same length, got "
                             f"{len(src_ids)} and {len(tgt_ids)}")
        self.src_ids = [list(map(int, s)) for s in src_ids]
        self.tgt_ids = [list(map(int, t)) for t in tgt_ids]

    @classmethod
    def from_token_pairs(cls, pairs_tokens: Sequence[TokenPair], src_vocab: Vocab,
                         tgt_vocab: Vocab) -> TranslationDataset:
        """Encode tokenized pairs with the two vocabularies (unknown words -> ``<unk>``)."""
        return cls([src_vocab.encode(s) for s, _ in pairs_tokens],
                   [tgt_vocab.encode(t) for _, t in pairs_tokens])

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, index: int) -> tuple[list[int], list[int]]:
        return self.src_ids[index], self.tgt_ids[index]

    def lengths(self) -> list[int]:
        """Per-example ``max(src_len, tgt_len + 1)``, the padded width it costs (for bucketing)."""
        return [max(len(s), len(t) + 1) for s, t in zip(self.src_ids, self.tgt_ids, strict=True)]


def collate_translation(batch: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int, *,
                        bos_id: int = 1, eos_id: int = 2) -> dict[str, Tensor]:
    """Pad ``B`` examples ``(src_ids, tgt_ids)`` (sources non-empty) to the batch's longest with
    ``pad_id`` -> ``{"src": [B, S], "src_lengths": [B], "tgt_in": [B, T] (<bos> + y), "tgt_out":
    [B, T] (y + <eos>), "tgt_lengths": [B] (len(y) + 1)}``, all int64."""
    if len(batch) == 0:
        raise ValueError("cannot collate an empty batch")
    srcs = [list(s) for s, _ in batch]
    tgts = [list(t) for _, t in batch]
    for i, s in enumerate(srcs):
        if not s:
            raise ValueError(f"example {i} of the batch has an empty source (filter_by_length)")
    return {
        "src": pad_ids(srcs, pad_id),
        "src_lengths": torch.tensor([len(s) for s in srcs], dtype=torch.long),
        "tgt_in": pad_ids([[bos_id] + t for t in tgts], pad_id),
        "tgt_out": pad_ids([t + [eos_id] for t in tgts], pad_id),
        "tgt_lengths": torch.tensor([len(t) + 1 for t in tgts], dtype=torch.long),
    }
