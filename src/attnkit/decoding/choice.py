"""The few best next tokens of every row, and their log-probabilities, without writing a
log-probability for every word of the vocabulary.

A decoder step ends in a choice: greedy keeps each row's most probable token, beam search the
``2k`` most probable of each hypothesis. Both need the log-probabilities of those few tokens
only. ``log_softmax`` shifts a row by one constant, so the tokens of largest logits are the
tokens of largest log-probability, and

    log p(w) = logit(w) - logsumexp(logits),

one reduction per row. ``torch.log_softmax(logits).topk(k)`` writes all ``V``
log-probabilities and then searches them.

The search is `top_k`. ``torch.topk`` (and ``max`` with indices) sort or scan with indices row
by row on the CPU, several times slower than a plain vectorised maximum. So `top_k` cuts each
row into chunks of `CHUNK` tokens, takes every chunk's maximum in one vectorised pass, and
searches only the ``k`` chunks of largest maxima. That finds exactly ``torch.topk``'s values.
Let ``M`` be the ``k``-th largest chunk maximum. A token greater than ``M`` lies in a chunk
whose maximum is greater than ``M``. Fewer than ``k`` chunks are like that, so each of them is
among the chunks searched. The ``k`` chunks searched also hold ``k`` values ``>= M``, which fill
the rest. The scores after the last whole chunk (fewer than `CHUNK`) are always searched too.
Only which of several *equal* values is returned may differ; ``k = 1`` returns the first, as
``torch.argmax`` does. Rows of too few chunks, and batches of fewer than `FEW_ROWS` rows, go to
``topk`` (``max``) directly.

Measured on ``[1000, 8002]`` float32 logits (a beam-5 step of 200 sentences over the Tatoeba
recipe's vocabulary), ``Intel(R) Xeon(R) Processor (AVX512, bf16 native: yes), torch
2.13.0+cpu`` (AMX), medians of 50 calls: `best_tokens` with ``k = 10`` took 12.8 ms against
24.9 for ``log_softmax`` then ``topk`` on one thread (6.8 against 12.3 on two), and with
``k = 1`` 7.6 against 15.3 for ``log_softmax`` then ``max`` (3.9 against 6.9). Whole decoding
of the Tatoeba test split, two threads: a few percent faster, more for beam search than for
greedy, within the host's spread (docs/results.md).

Example:
    ```python
    log_probs, tokens = best_tokens(logits, 2 * beam)   # logits [rows, V] -> [rows, 2 * beam]
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK = 64  # tokens per chunk: 32..96 were within 20% of each other on [1000, 8002] at k=10
# Below this many rows the shortcut's dozen small operations cost more than they save: on
# [rows, 8002] (machine of the module docs, 2 threads, medians of 100 calls) top_k took,
# against max (k=1) or topk (k=10) over the whole rows: k=1 35 us against 10 on one row,
# 50 against 37 on 8, 55 against 103 on 16; k=10 41 against 22, 68 against 75, 99 against 143.
FEW_ROWS = 16


def top_k(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` largest scores of every row, best first, and their positions.

    The values equal ``scores.topk(k, dim=-1).values`` exactly (module docs); among equal
    values the positions may differ, except for ``k = 1``, which returns the first maximum
    like ``torch.argmax``. Fewer than `FEW_ROWS` rows, or rows of at most ``k`` chunks, are
    searched by ``topk`` (``max``) directly.

    Args:
        scores: ``[rows, V]``.
        k: how many per row, ``1 <= k <= V``.

    Returns:
        ``(values [rows, k], positions [rows, k])``, positions into ``V`` (int64).

    Example:
        ```python
        top_k(torch.tensor([[0.1, 3.0, 2.0, 2.5]]), 2)   # ([[3.0, 2.5]], [[1, 3]])
        ```
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
    """The ``k`` most probable next tokens of every row and their log-probabilities.

    Args:
        logits: ``[rows, V]`` unnormalised scores (any float dtype; computed in float32).
        k: tokens per row, ``1 <= k <= V``.

    Returns:
        ``(log_probs [rows, k] float32, tokens [rows, k] int64)``, most probable first: the
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
        values, positions = scores.max(dim=-1, keepdim=True)
        return values, positions
    return scores.topk(k, dim=-1)
