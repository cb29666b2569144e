"""Length bucketing: batches of similar-length examples, so little compute goes to padding;
and `pad_ids`, the one function that pads id sequences into a batch tensor.

``bucket_batch_plan`` returns a *batch plan*, the function ``(epoch, seed) -> list[list[int]]``
the trainer accepts (docs/DEVELOPING.md): shuffle all indices, cut them into large pools, sort
each pool by length, chunk it into batches, shuffle the batch order. Pools keep randomness
between epochs (a fully sorted order would give the same batches every epoch); sorting inside a
pool removes most padding.

Example:
    ```python
    plan = bucket_batch_plan([len(x) for x in src_ids], batch_size=64)
    batches = plan(epoch=0, seed=0)         # every index exactly once
    padding_fraction(batches, lengths)      # e.g. 0.05 vs 0.45 for random batches
    pad_ids([[5, 6, 7], [8]], pad=0)        # tensor([[5, 6, 7], [8, 0, 0]])
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

BatchPlan = Callable[[int, int], list[list[int]]]


def bucket_batch_plan(
    lengths: Sequence[int],
    batch_size: int,
    *,
    max_tokens: int | None = None,
    shuffle: bool = True,
    pool_batches: int = 50,
) -> BatchPlan:
    """Make a bucketing batch plan.

    Args:
        lengths: length of each example (e.g. ``max(len(src), len(tgt))``), ``[num_examples]``.
        batch_size: most examples per batch.
        max_tokens: optional cap on ``batch_len * longest_in_batch`` (padded tokens); an example
            longer than the cap gets a batch of its own.
        shuffle: False gives one global length-sorted order, the same for every epoch and
            seed (for evaluation).
        pool_batches: pool size in batches; larger pools mean less padding, less randomness.

    Returns:
        ``plan(epoch, seed) -> list[list[int]]``, a pure function of its arguments covering
        every index exactly once.
    """
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.ndim != 1:
        raise ValueError(f"lengths must have shape [num_examples], got {lens.shape}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if pool_batches < 1:
        raise ValueError(f"pool_batches must be >= 1, got {pool_batches}")
    pool_size = batch_size * pool_batches

    def plan(epoch: int, seed: int) -> list[list[int]]:
        if not shuffle:
            order = np.argsort(lens, kind="stable")
            return _chunk(order, lens, batch_size, max_tokens)
        rng = np.random.default_rng([int(seed), int(epoch)])
        order = rng.permutation(len(lens))
        batches: list[list[int]] = []
        for start in range(0, len(order), pool_size):
            pool = order[start:start + pool_size]
            pool = pool[np.argsort(lens[pool], kind="stable")]
            batches.extend(_chunk(pool, lens, batch_size, max_tokens))
        perm = rng.permutation(len(batches))
        return [batches[i] for i in perm]

    return plan


def _chunk(order: np.ndarray, lens: np.ndarray, batch_size: int, max_tokens: int | None):
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for idx in order.tolist():
        n = int(lens[idx])
        grown = max(longest, n)
        too_many = max_tokens is not None and current and grown * (len(current) + 1) > max_tokens
        if len(current) == batch_size or too_many:
            batches.append(current)
            current, grown = [], n
        current.append(idx)
        longest = grown
    if current:
        batches.append(current)
    return batches


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> float:
    """Share of padded positions: ``1 - real tokens / (sum over batches of size * longest)``."""
    lens = np.asarray(lengths, dtype=np.int64)
    padded = sum(len(b) * int(lens[list(b)].max()) for b in batches if len(b))
    real = sum(int(lens[list(b)].sum()) for b in batches)
    return 0.0 if padded == 0 else 1.0 - real / padded


def pad_ids(rows: Sequence[Sequence[int]], pad: int, *, width: int | None = None,
            side: str = "post") -> Tensor:
    """Id sequences as one batch tensor ``[batch, width]`` (int64), ``pad`` filling each row
    after its ids (``side="post"``) or before them (``"pre"``).

    Args:
        rows: the id sequences (any may be empty); none longer than ``width``.
        pad: the padding id.
        width: the batch's width (None: the longest row's).
        side: where the padding goes.
    """
    width = max((len(r) for r in rows), default=0) if width is None else width
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        ids = torch.as_tensor(list(r), dtype=torch.long)
        if side == "pre":
            out[i, width - len(ids):] = ids
        else:
            out[i, :len(ids)] = ids
    return out
