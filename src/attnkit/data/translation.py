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


def kept_by_length(pairs_tokens: Sequence[TokenPair], max_len: int
                   ) -> tuple[list[int], DropReport]:
    """The indices of the pairs whose two sides are non-empty and at most ``max_len`` tokens,
    in input order, and the others counted by reason."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    kept: list[int] = []
    drops = DropReport("pair")
    for k, (s, t) in enumerate(pairs_tokens):
        if not s or not t:
            drops.add("with an empty side")
        elif len(s) > max_len or len(t) > max_len:
            drops.add(f"longer than {max_len} tokens")
        else:
            kept.append(k)
    return kept, drops


class TranslationDataset:
    """Indexable ``(src_ids, tgt_ids)`` examples, plain int lists (targets without ``<bos>`` /
    ``<eos>``: the collate adds them); with ``links``, ``(src_ids, tgt_ids, links)``: each
    pair's ``(target piece, source piece)`` alignment links, 0-based (the alignment loss)."""

    def __init__(self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                 links: Sequence[Sequence[tuple[int, int]]] | None = None):
        if len(src_ids) != len(tgt_ids) or (links is not None and len(links) != len(src_ids)):
            raise ValueError(f"src_ids, tgt_ids and links must have the same length, got "
                             f"{len(src_ids)}, {len(tgt_ids)} and "
                             f"{'none' if links is None else len(links)}")
        self.src_ids = [list(map(int, s)) for s in src_ids]
        self.tgt_ids = [list(map(int, t)) for t in tgt_ids]
        self.links = None if links is None else [list(x) for x in links]

    @classmethod
    def from_token_pairs(cls, pairs_tokens: Sequence[TokenPair], src_vocab: Vocab,
                         tgt_vocab: Vocab, links: Sequence[Sequence[tuple[int, int]]] | None = None
                         ) -> TranslationDataset:
        """Encode tokenized pairs with the two vocabularies (unknown words -> ``<unk>``)."""
        return cls([src_vocab.encode(s) for s, _ in pairs_tokens],
                   [tgt_vocab.encode(t) for _, t in pairs_tokens], links)

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, index: int) -> tuple:
        if self.links is None:
            return self.src_ids[index], self.tgt_ids[index]
        return self.src_ids[index], self.tgt_ids[index], self.links[index]

    def lengths(self) -> list[int]:
        """Per-example ``max(src_len, tgt_len + 1)``, the padded width it costs (for bucketing)."""
        return [max(len(s), len(t) + 1) for s, t in zip(self.src_ids, self.tgt_ids, strict=True)]


def collate_translation(batch: Sequence[tuple], pad_id: int, *, bos_id: int = 1,
                        eos_id: int = 2) -> dict[str, Tensor]:
    """Pad ``B`` examples ``(src_ids, tgt_ids)`` (sources non-empty) to the batch's longest with
    ``pad_id`` -> ``{"src": [B, S], "src_lengths": [B], "tgt_in": [B, T] (<bos> + y), "tgt_out":
    [B, T] (y + <eos>), "tgt_lengths": [B] (len(y) + 1)}``, all int64. Examples with links
    add ``"align" [B, T, S]`` float: 1 where the target piece *read* at a position (``tgt_in``:
    piece ``t`` at ``t + 1``) is linked to a source piece."""
    if len(batch) == 0:
        raise ValueError("cannot collate an empty batch")
    srcs = [list(s) for s, *_ in batch]
    tgts = [list(t) for _, t, *_ in batch]
    for i, s in enumerate(srcs):
        if not s:
            raise ValueError(f"example {i} of the batch has an empty source (kept_by_length)")
    out = {
        "src": pad_ids(srcs, pad_id),
        "src_lengths": torch.tensor([len(s) for s in srcs], dtype=torch.long),
        "tgt_in": pad_ids([[bos_id] + t for t in tgts], pad_id),
        "tgt_out": pad_ids([t + [eos_id] for t in tgts], pad_id),
        "tgt_lengths": torch.tensor([len(t) + 1 for t in tgts], dtype=torch.long),
    }
    if len(batch[0]) == 3:
        align = torch.zeros(len(batch), out["tgt_in"].shape[1], out["src"].shape[1])
        for b, (_, _, links) in enumerate(batch):
            if links:
                t, s = torch.tensor(links).T
                align[b, t + 1, s] = 1.0
        out["align"] = align
    return out
