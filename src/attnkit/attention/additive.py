"""Additive attention (Bahdanau) and Luong's "concat" score, memory-bounded for long inputs.

``score(q, k) = v^T tanh(W_q q + W_k k)``. When the broadcast ``[batch, Tq, Tk, units]``
tensor would exceed ``memory_budget_mb``, `_ChunkedAdditiveScore` scores blocks of query rows
and recomputes each block's ``tanh`` in backward; the results equal the broadcast form up to
float rounding. Memory and time: docs/results.md ("Attention kernels").
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.attention.base import ScoreAttention


class _ChunkedAdditiveScore(torch.autograd.Function):
    """`additive_scores` ``chunk`` query rows at a time; saves only the inputs, and backward
    recomputes ``tanh`` per block (faster than ``torch.utils.checkpoint``, which re-runs autograd).
    """

    @staticmethod
    def forward(ctx, pq: Tensor, pk: Tensor, v: Tensor, chunk: int) -> Tensor:  # type: ignore[override]
        batch, tq, _ = pq.shape
        out = pq.new_empty(batch, tq, pk.shape[1])
        pk_b = pk.unsqueeze(1)
        for start in range(0, tq, chunk):
            block = pq[:, start:start + chunk].unsqueeze(2) + pk_b  # [batch, c, Tk, units]
            block.tanh_()  # in place: one block-sized buffer alive at a time
            out[:, start:start + chunk] = torch.matmul(block, v)
        ctx.save_for_backward(pq, pk, v)
        ctx.chunk = chunk
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        pq, pk, v = ctx.saved_tensors
        chunk = ctx.chunk
        need_pq, need_pk, need_v, _ = ctx.needs_input_grad
        units = pq.shape[-1]
        grad_pq = torch.empty_like(pq) if need_pq else None
        grad_pk = torch.zeros_like(pk) if need_pk else None
        grad_v = torch.zeros_like(v) if need_v else None
        pk_b = pk.unsqueeze(1)
        for start in range(0, pq.shape[1], chunk):
            block = pq[:, start:start + chunk].unsqueeze(2) + pk_b  # [batch, c, Tk, units]
            block.tanh_()
            g = grad_out[:, start:start + chunk].contiguous()  # [batch, c, Tk]
            batch, rows, tk = g.shape
            if need_v:
                # d score / d v = tanh(...): contract over batch, query and key at once.
                grad_v += g.view(1, -1).matmul(block.view(-1, units)).view(units)
            if not (need_pq or need_pk):
                continue
            # d score / d (pq + pk)[u] = g * v[u] * (1 - tanh^2). v factors out and the "1"
            # term is a plain sum of g, so only sum(g * tanh^2) needs the block: fewer passes
            # over block-sized memory than forming the full product.
            block.square_()
            if need_pq:
                g_t2 = torch.bmm(g.view(-1, 1, tk), block.view(-1, tk, units))
                grad_pq[:, start:start + rows] = v * (g.sum(-1, keepdim=True)
                                                      - g_t2.view(batch, rows, units))
            if need_pk:
                g_t2 = block.mul_(g.unsqueeze(-1)).sum(1)  # [batch, Tk, units]
                grad_pk += v * (g.sum(1).unsqueeze(-1) - g_t2)
        return grad_pq, grad_pk, grad_v, None


def additive_scores(pq: Tensor, pk: Tensor, v: Tensor, memory_budget_mb: float) -> Tensor:
    """``v^T tanh(pq_i + pk_j)`` ``[batch, Tq, Tk]`` for ``pq [batch, Tq, units]``, ``pk [batch,
    Tk, units]``, ``v [units]``, in blocks of at most ``memory_budget_mb``."""
    batch, tq, units = pq.shape
    tk = pk.shape[1]
    row_bytes = batch * tk * units * pq.element_size()
    chunk = max(1, int(memory_budget_mb * 2**20) // max(row_bytes, 1))
    if chunk >= tq:
        # Small inputs (decoder steps, short sequences): the plain broadcast form is fastest.
        return torch.matmul(torch.tanh(pq.unsqueeze(2) + pk.unsqueeze(1)), v)
    return _ChunkedAdditiveScore.apply(pq, pk, v, chunk)


class AdditiveAttention(ScoreAttention):
    """Bahdanau et al. (2015) additive attention: ``score(q, k) = v^T tanh(W_q q + W_k k + b)``.

    Args:
        query_dim, key_dim: sizes of the last query and key dimensions.
        units: size of the hidden layer (``W_q: [units, query_dim]``, ``W_k: [units, key_dim]``).
        memory_budget_mb: largest ``[batch, rows, Tk, units]`` temporary, in MiB (backward holds
            up to two); larger inputs are scored in blocks of query rows, with the same results.
        bias: the bias ``b`` of ``W_k`` (Bahdanau has one; Luong's concat does not).

    The common call (`attnkit.attention.base`), or ``memory()`` once per source (``W_k k + b``)
    and ``attend()`` per step -> context ``[batch, Tq, value_dim]``, weights ``[batch, Tq, Tk]``.
    """

    def __init__(self, query_dim: int, key_dim: int, units: int, *,
                 memory_budget_mb: float = 64.0, bias: bool = True):
        super().__init__()
        if min(query_dim, key_dim, units) < 1:
            raise ValueError(f"query_dim, key_dim and units must be >= 1, "
                             f"got {query_dim}, {key_dim}, {units}")
        if not memory_budget_mb > 0:
            raise ValueError(f"memory_budget_mb must be > 0, got {memory_budget_mb}")
        self.query_dim, self.key_dim, self.units = query_dim, key_dim, units
        self.memory_budget_mb = float(memory_budget_mb)
        self.query_proj = nn.Linear(query_dim, units, bias=False)
        self.key_proj = nn.Linear(key_dim, units, bias=bias)
        self.v = nn.Parameter(torch.empty(units))
        nn.init.uniform_(self.v, -1.0 / math.sqrt(units), 1.0 / math.sqrt(units))

    def project_keys(self, key: Tensor) -> Tensor:
        """``key [batch, Tk, key_dim]`` -> ``W_k k + b`` ``[batch, Tk, units]``."""
        return self.key_proj(key)

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:
        """``query [batch, Tq, query_dim]``, ``keys [batch, Tk, units]`` -> ``[batch, Tq, Tk]``."""
        return additive_scores(self.query_proj(query), keys, self.v.to(keys.dtype),
                               self.memory_budget_mb)


class ConcatAttention(AdditiveAttention):
    """Luong et al. (2015) "concat" score ``v^T tanh(W [q; k])``, ``W = [W_q | W_k]``
    (`weight`): `AdditiveAttention` without the key bias (``bias=True`` gives Bahdanau's).
    """

    def __init__(self, query_dim: int, key_dim: int, units: int, *,
                 memory_budget_mb: float = 64.0, bias: bool = False):
        super().__init__(query_dim, key_dim, units, memory_budget_mb=memory_budget_mb,
                         bias=bias)

    @property
    def weight(self) -> Tensor:
        """``W = [W_q | W_k]``, ``[units, query_dim + key_dim]``."""
        return torch.cat([self.query_proj.weight, self.key_proj.weight], dim=1)
