"""Additive attention (Bahdanau) and Luong's "concat" score, memory-bounded for long inputs.

``score(q, k) = v^T tanh(W_q q + W_k k)``. The naive broadcast form builds a ``[batch, Tq, Tk,
units]`` tensor (2 GiB in float32 at (8, 512, 512, 256)) and autograd keeps it for the backward
pass. Here, when that tensor would exceed ``memory_budget_mb``, the scores are computed in blocks
of query rows by `_ChunkedAdditiveScore`, an autograd Function that saves only its inputs
(``W_q q``, ``W_k k``, ``v``) and recomputes each block's ``tanh`` in backward. Results equal
the broadcast form up to float rounding (the same per-element operations; only the grouping of
the gradient sums differs). One query row is the smallest block: a single row larger than the
budget (a decoder step over a huge source) runs unblocked.
Its memory and time against the broadcast form: docs/results.md ("Attention kernels").
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.attention.base import ScoreAttention


class _ChunkedAdditiveScore(torch.autograd.Function):
    """``scores[b, i, j] = sum_u v[u] tanh(pq[b, i, u] + pk[b, j, u])``, ``chunk`` rows at a time.

    Inputs: ``pq [batch, Tq, units]``, ``pk [batch, Tk, units]``, ``v [units]``, ``chunk`` (int).
    Output: ``[batch, Tq, Tk]``. Saves only the inputs; backward recomputes ``tanh`` per block
    and reduces it with in-place ops and a bmm (faster than ``torch.utils.checkpoint`` per
    block, which re-runs autograd with separate gradient buffers).
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
    """``v^T tanh(pq_i + pk_j)`` for all pairs, never holding more than the budget per block.

    Args:
        pq: projected queries ``[batch, Tq, units]``.
        pk: projected keys ``[batch, Tk, units]``.
        v: ``[units]``.
        memory_budget_mb: the largest ``[batch, rows, Tk, units]`` block allowed, in MiB.

    Returns:
        Scores ``[batch, Tq, Tk]``.
    """
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

    ``W_k k + b`` is computed once per source (`project_keys`, used by ``memory()``).
    Scores for long inputs are computed in blocks of query rows so that no temporary exceeds
    ``memory_budget_mb``, forward and backward (the backward recomputes each block's ``tanh``
    instead of storing it); the results equal the unblocked form.

    Args:
        query_dim: size of the last query dimension.
        key_dim: size of the last key dimension.
        units: size of the hidden layer (``W_q: [units, query_dim]``, ``W_k: [units, key_dim]``).
        memory_budget_mb: largest ``[batch, rows, Tk, units]`` temporary, in MiB (backward holds
            up to two such blocks). Inputs that fit use the plain form with no blocking.
        bias: the bias ``b`` of ``W_k`` (Bahdanau has one; Luong's concat does not).

    Call:
        ``attention(query, key, value=None, *, key_lengths=None, key_mask=None,
        query_lengths=None, attn_mask=None, causal=False, need_weights=False)``, or ``memory()``
        once per source and ``attend()`` per decoder step.

    Shapes:
        query ``[batch, Tq, query_dim]``, key ``[batch, Tk, key_dim]``, value ``[batch, Tk,
        value_dim]`` (defaults to key) -> context ``[batch, Tq, value_dim]``, weights ``[batch, Tq,
        Tk]``.

    Example:
        >>> att = AdditiveAttention(query_dim=8, key_dim=6, units=16)
        >>> mem = att.memory(torch.randn(2, 5, 6), key_lengths=torch.tensor([5, 3]))
        >>> out = att.attend(torch.randn(2, 1, 8), mem, need_weights=True)  # one decoder step
        >>> out.context.shape, out.weights.shape
        (torch.Size([2, 1, 6]), torch.Size([2, 1, 5]))
    """

    def __init__(self, query_dim: int, key_dim: int, units: int, *,
                 memory_budget_mb: float = 64.0, bias: bool = True):
        super().__init__()
        if min(query_dim, key_dim, units) < 1:
            raise ValueError(f"query_dim, key_dim and units must be >= 1, "
                             f"got {query_dim}, {key_dim}, {units}")
        if not memory_budget_mb > 0:
            raise ValueError(f"memory_budget_mb must be > 0, got {memory_budget_mb}")
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.units = units
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
    """Luong et al. (2015) "concat" score ``v^T tanh(W [q; k])``: the additive score again.

    Splitting ``W [units, query_dim + key_dim]`` by columns into ``[W_q | W_k]`` gives ``W [q; k]
    = W_q q + W_k k``, so this is `AdditiveAttention` without the key bias (Luong's
    formula has none; pass ``bias=True`` for Bahdanau's). `weight` returns the
    concatenated ``W``. Same arguments, call, shapes and memory behaviour as AdditiveAttention.

    Example:
        >>> att = ConcatAttention(query_dim=8, key_dim=6, units=16)
        >>> att.weight.shape
        torch.Size([16, 14])
    """

    def __init__(self, query_dim: int, key_dim: int, units: int, *,
                 memory_budget_mb: float = 64.0, bias: bool = False):
        super().__init__(query_dim, key_dim, units, memory_budget_mb=memory_budget_mb,
                         bias=bias)

    @property
    def weight(self) -> Tensor:
        """``W = [W_q | W_k]``, ``[units, query_dim + key_dim]``."""
        return torch.cat([self.query_proj.weight, self.key_proj.weight], dim=1)
