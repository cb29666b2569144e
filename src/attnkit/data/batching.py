"""Batches by length, so little compute goes to padding: `bucket_batch_plan` (the trainer's
plan: shuffled pools, each sorted by length and cut into batches, in shuffled order),
`plan_length_groups` (a sorted batch cut into groups each encoded at its own length), and
`pad_ids`, the one function that pads id sequences into a batch tensor."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

BatchPlan = Callable[[int, int], list[list[int]]]


def bucket_batch_plan(lengths: Sequence[int], batch_size: int, *, max_tokens: int | None = None,
                      shuffle: bool = True, pool_batches: int = 50) -> BatchPlan:
    """A bucketing batch plan: ``plan(epoch, seed) -> list[list[int]]``, a pure function covering
    every index once. ``max_tokens``: a cap on padded tokens per batch (a longer example is
    alone); ``shuffle=False``: one length-sorted order (evaluation); ``pool_batches``: the pool
    size in batches (larger: less padding, less randomness)."""
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.ndim != 1:
        raise ValueError(f"lengths must have shape [num_examples], got {lens.shape}")
    sizes = {"batch_size": batch_size, "max_tokens": max_tokens, "pool_batches": pool_batches}
    for name, value in sizes.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
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
    batches, current, longest = [], [], 0
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


def pad_ids(rows: Sequence[Sequence[int]], pad: int, *, width: int | None = None,
            side: str = "post") -> Tensor:
    """Id sequences (any may be empty, none longer than ``width``; None: the longest) as one
    ``[batch, width]`` int64 tensor, ``pad`` after the ids (``side="post"``) or before (``"pre"``).
    """
    width = max((len(r) for r in rows), default=0) if width is None else width
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        ids = torch.as_tensor(list(r), dtype=torch.long)
        start = width - len(ids) if side == "pre" else 0
        out[i, start:start + len(ids)] = ids
    return out


# The cost of a length group in the model's work per token (its projections): ``rows * keep *
# (1 + keep * GROUP_PAIR_COST) + GROUP_COST`` for ``rows`` reviews cut to ``keep`` slots: the
# attention's per-pair work beside a token's, and a group's fixed cost (its many small operator
# calls, forward and backward) in tokens, measured in docs/results.md.
GROUP_PAIR_COST = 0.01
GROUP_COST = 500.0


def plan_length_groups(sorted_lengths: list[int], *, max_groups: int = 6,
                       min_rows: int = 8) -> list[int]:
    """Sizes of the length groups (in order, summing to ``len(sorted_lengths)``, each cut to
    its longest length) that encode a batch of ``sorted_lengths`` (ascending) cheapest by
    `GROUP_COST`: at most ``max_groups``, starting at multiples of ``min_rows`` (which keeps
    the search tiny) and of at least ``min_rows`` rows but in a batch smaller than that."""
    n = len(sorted_lengths)
    if n == 0:
        return []
    if sorted_lengths[0] == sorted_lengths[-1]:
        return [n]  # equal lengths: splitting only adds groups' fixed costs (most IMDB batches)
    cuts = list(range(0, n - min_rows + 1, min_rows)) if n >= 2 * min_rows else [0]
    cuts = cuts + [n] if cuts[-1] != n else cuts
    if n - cuts[-2] < min_rows and len(cuts) > 2:
        del cuts[-2]  # the last group takes the remainder

    def cost(i: int, j: int) -> float:
        keep = max(sorted_lengths[cuts[j] - 1], 1)
        return (cuts[j] - cuts[i]) * keep * (1.0 + keep * GROUP_PAIR_COST) + GROUP_COST

    m = len(cuts) - 1
    # best[g][j]: cheapest cover of the first cuts[j] rows by g groups; back pointers in prev.
    inf = float("inf")
    best = [[inf] * (m + 1) for _ in range(max_groups + 1)]
    prev = [[0] * (m + 1) for _ in range(max_groups + 1)]
    best[0][0] = 0.0
    for g in range(1, max_groups + 1):
        for j in range(1, m + 1):
            for i in range(j):
                c = best[g - 1][i] + cost(i, j)
                if c < best[g][j]:
                    best[g][j], prev[g][j] = c, i
    groups = min(range(1, max_groups + 1), key=lambda g: best[g][m])
    sizes, j = [], m
    for g in range(groups, 0, -1):
        i = prev[g][j]
        sizes.append(cuts[j] - cuts[i])
        j = i
    return sizes[::-1]
