"""The few best next tokens of every row, and their log-probabilities, without writing a
log-probability for every word of the vocabulary.

``log p(w) = logit(w) - logsumexp(logits)``, one reduction per row, for the chosen tokens only.
`top_k` finds exactly ``torch.topk``'s values by searching only the ``k`` chunks of `CHUNK`
tokens with the largest maxima (why that is exact: docs/concepts.md, "Choosing the next
tokens"; its timings: docs/results.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK = 64  # tokens per chunk
FEW_ROWS = 16  # below this many rows the shortcut's dozen small operations cost more than it saves


def top_k(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` largest scores of each row of ``scores [rows, V]``, best first, and where.

    Returns ``(values [rows, k], positions [rows, k] int64)``. The values equal ``scores.topk(k)``
    exactly; among equal values the positions may differ, except for ``k = 1`` (the first
    maximum, as ``torch.argmax``).
    """
    rows, width = scores.shape
    if not 1 <= k <= width:
        raise ValueError(f"k must be between 1 and the {width} scores of a row, got {k}")
    chunks = width // CHUNK
    if chunks <= k or rows < FEW_ROWS:  # the shortcut would search as much, or cost more
        return _largest(scores, k)
    body = scores.narrow(1, 0, chunks * CHUNK).unflatten(1, (chunks, CHUNK))
    _, best_chunks = _largest(body.amax(dim=-1), k)                       # [rows, k]
    candidates = body.gather(1, best_chunks.unsqueeze(-1).expand(rows, k, CHUNK)).flatten(1)
    tail = width - chunks * CHUNK  # the scores after the last whole chunk: always searched
    if tail:
        candidates = torch.cat([candidates, scores.narrow(1, chunks * CHUNK, tail)], 1)
    values, at = _largest(candidates, k)
    positions = best_chunks.gather(1, (at // CHUNK).clamp_(max=k - 1)) * CHUNK + at % CHUNK
    if tail:
        positions = torch.where(at >= k * CHUNK, at - k * CHUNK + chunks * CHUNK, positions)
    return values, positions


def best_tokens(logits: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` most probable next tokens of ``logits [rows, V]`` and their log-probabilities.

    Returns ``(log_probs [rows, k] float32, tokens [rows, k] int64)``, most probable first, the
    values of ``torch.log_softmax(logits, -1).topk(k)`` up to float rounding.
    """
    logits = logits.float()
    values, tokens = top_k(logits, k)
    # log p = (logit - peak) - log(sum(exp(logits - peak))), with the row maximum top_k already
    # found (its first value): no exp overflows, one pass fewer than torch.logsumexp (which
    # looks for the maximum again), and both terms are small, so large logits lose no digits.
    # One formula for any number of rows: a sentence's score does not depend on its batch.
    peak = values[:, :1]
    return (values - peak) - (logits - peak).exp_().sum(dim=-1, keepdim=True).log_(), tokens


def _largest(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """``topk`` along the last dimension; ``max`` for ``k = 1`` (the first of equal values)."""
    if k == 1:
        return scores.max(dim=-1, keepdim=True)
    return scores.topk(k, dim=-1)
