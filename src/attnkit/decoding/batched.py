"""Decode many sentences: group by length, batch by tokens, results in input order.

Sorted by source length, a batch holds sentences of similar length (little padding, they end
at about the same step), cut by a sentence count and/or a token budget (padded rows times the
beam), so a batch of short sentences can be much larger. By default `decode_many` batches by
tokens only (`DECODE_MAX_TOKENS`): the more rows a small model's step holds, the cheaper each,
up to where its log-probabilities leave the CPU caches (docs/results.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnkit.data.batching import pad_ids
from attnkit.decoding.beam import beam_search
from attnkit.decoding.greedy import greedy_decode
from attnkit.decoding.hypothesis import Hypothesis
from attnkit.models.step import StepModel

DECODE_MAX_TOKENS = 8192  # sentences * beam * longest source per batch (module docs)


def length_batches(lengths: Sequence[int], *, batch_size: int | None = 64,
                   max_tokens: int | None = None, beam: int = 1) -> list[list[int]]:
    """Indices of ``lengths`` in batches of similar length (shortest first), each index once.

    A batch holds at most ``batch_size`` sentences and ``max_tokens`` ``sentences * beam *
    longest source`` tokens (None: no limit); a sentence over the budget gets a batch of its own.
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if batch_size is None and max_tokens is None:
        raise ValueError("give batch_size, max_tokens or both")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Sorted order: the newest sentence is the longest of the batch.
        full = batch_size is not None and len(current) >= batch_size
        over = (max_tokens is not None and current
                and (len(current) + 1) * beam * max(lengths[i], 1) > max_tokens)
        if full or over:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def padded_sources(src_ids: Sequence[Sequence[int]], pad: int,
                   device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Id sequences as one batch: ``src [batch, longest]`` (padded with ``pad``) and
    ``src_lengths [batch]``, on ``device``."""
    return (pad_ids(src_ids, pad).to(device),
            torch.tensor([len(s) for s in src_ids], device=device))


def decode_many(model: StepModel, src_ids: Sequence[Sequence[int]], *, beam: int = 1,
                alpha: float = 0.6, batch_size: int | None = None,
                max_tokens: int | None = DECODE_MAX_TOKENS,
                need_weights: bool | str = True, use_cache: bool = True,
                max_len_ratio: float = 2.0, max_len_offset: int = 5,
                max_len: int | None = 200) -> list[Hypothesis]:
    """Greedy (``beam=1``) or beam search over any number of id sequences: one `Hypothesis` per
    sentence, in input order.

    ``batch_size``/``max_tokens`` batch them (`length_batches`; default `DECODE_MAX_TOKENS`); the
    other options are `beam_search`'s.
    """
    device = next(model.parameters()).device
    options = {"max_len_ratio": max_len_ratio, "max_len_offset": max_len_offset,
              "max_len": max_len, "need_weights": need_weights, "use_cache": use_cache}
    out: list[Hypothesis | None] = [None] * len(src_ids)
    for idx in length_batches([len(s) for s in src_ids], batch_size=batch_size,
                              max_tokens=max_tokens, beam=beam):
        src, src_len = padded_sources([src_ids[i] for i in idx], model.config.pad_id, device)
        if beam > 1:
            hyps = beam_search(model, src, src_len, beam_size=beam, alpha=alpha, **options)
        else:
            hyps = greedy_decode(model, src, src_len, **options)
        for i, h in zip(idx, hyps, strict=True):
            out[i] = h
    return out  # type: ignore[return-value]
