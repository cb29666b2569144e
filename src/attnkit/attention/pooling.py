"""Multi-head self-attention then global max pooling over the queries (the 2018 Keras sentiment
model's ``Attention(8, 16)`` and ``GlobalMaxPooling1D``), with a backward that visits only the
winning queries: `self_attention_max_pool`, and `max_pool_projected` from a projection made
elsewhere. Why the backward is exact: docs/concepts.md ("Attention then max pooling").
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import Tensor

# Samples per forward chunk of one head: about this many scores ([T, T] floats per sample),
# split into equal chunks; one buffer reused by every head and chunk (docs/results.md, issue #31).
_CHUNK_SCORES = 1 << 20


def _label(name: str):
    """A profiler label while a profiler runs (benchmarks/imdb_step_profile.py), else nothing."""
    if torch.autograd._profiler_enabled():
        return torch.profiler.record_function(name)
    return contextlib.nullcontext()


def _softmax(scores: Tensor, out: Tensor) -> Tensor:
    """Softmax over the last dimension into ``out``; half precision is normalised in float32
    and rounded once, as autocast does."""
    if scores.dtype in (torch.float16, torch.bfloat16):
        return out.copy_(torch.softmax(scores, -1, dtype=torch.float32))
    return torch.softmax(scores, -1, out=out)


def _key_bias(key_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """``[batch, Tk]``: 0 at real keys, ``finfo.min`` at masked ones (exact zeros after the
    softmax, two passes fewer than ``masked_fill``); None without a mask."""
    if key_mask is None:
        return None
    bias = torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device)
    return bias.masked_fill_(~key_mask, torch.finfo(dtype).min)


def _drop_full(mask: Tensor | None) -> Tensor | None:
    """None for a CPU mask that is all True (e.g. a length group of full reviews): no pass over
    the scores is spent on it. A CUDA mask is kept (the check would wait for the device)."""
    if mask is not None and mask.device.type == "cpu" and bool(mask.all()):
        return None
    return mask


def _alive(key_mask: Tensor | None, query_mask: Tensor | None) -> Tensor | None:
    """``[batch]`` bool: samples with a key and a query (the others pool to zeros), or None
    when every sample has both (checked on CPU only, where it costs no device sync)."""
    alive = None
    for mask in (key_mask, query_mask):
        if mask is not None:
            has = mask.any(-1)
            alive = has if alive is None else alive & has
    if alive is not None and alive.device.type == "cpu" and bool(alive.all()):
        return None
    return alive


def _pool_heads(qkv: Tensor, heads: int, key_bias: Tensor | None, query_mask: Tensor | None,
                scale: float, pooled: Tensor, winners: Tensor | None) -> None:
    """Each head's attention and the max of its context over the queries, in chunks of samples.

    ``qkv [b, t, 3 * heads * d]``, ``key_bias [b, t]`` or None, ``query_mask [b, t]`` or None.
    Writes ``pooled [b, heads, d]`` and, when given, the winning queries ``winners [b, heads, d]``.
    """
    b, t = qkv.shape[:2]
    d = pooled.shape[-1]
    # Head h's q, k, v of every sample are strided [b, t, d] views of qkv that batched
    # matmuls read in place: no [b, heads, t, d] copies.
    parts = qkv.view(b, t, 3, heads, d)
    step = max(1, _CHUNK_SCORES // max(1, t * t))
    step = -(-b // -(-b // step))  # equal chunks: a small remainder chunk runs slowly
    scores = qkv.new_empty(min(step, b), t, t)  # reused by every chunk
    weights = torch.empty_like(scores)
    # A head's context, transposed ([n, d, t]): the max over the queries is then over the
    # innermost dimension, several times faster than over the middle one of [n, t, d].
    context = qkv.new_empty(min(step, b), d, t)
    for h in range(heads):
        q, k, v = parts[:, :, 0, h], parts[:, :, 1, h], parts[:, :, 2, h]
        for s in range(0, b, step):
            rows = slice(s, s + step)
            n = min(step, b - s)
            c = context[:n]
            with _label("attnkit.attention_heads"):
                torch.baddbmm(scores[:n], q[rows], k[rows].transpose(1, 2), beta=0.0,
                              alpha=scale, out=scores[:n])
            with _label("attnkit.softmax"):
                if key_bias is not None:
                    scores[:n].add_(key_bias[rows, None, :])
                _softmax(scores[:n], out=weights[:n])
            with _label("attnkit.attention_heads"):
                torch.bmm(v[rows].transpose(1, 2), weights[:n].transpose(1, 2), out=c)
            with _label("attnkit.max_pool"):
                if query_mask is not None:
                    c.masked_fill_(~query_mask[rows, None, :], torch.finfo(c.dtype).min)
                # the value and the winning query row of every feature of head h
                if winners is not None:
                    torch.max(c, dim=2, out=(pooled[rows, h], winners[rows, h]))
                else:
                    torch.amax(c, dim=2, out=pooled[rows, h])


def _attend_and_pool(qkv: Tensor, heads: int, d: int, key_mask: Tensor | None,
                     query_mask: Tensor | None, scale: float, winners_too: bool
                     ) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """The forward from ``qkv [b, t, 3 * heads * d]``: pooled ``[b, heads, d]`` and, for the
    backward, the key bias, the samples alive and the winning queries (if ``winners_too``).
    """
    b = qkv.shape[0]
    key_bias = _key_bias(key_mask, qkv.dtype)
    pooled = qkv.new_empty(b, heads, d)
    # Without a backward to come (inference) the winners are not needed, and amax is ~4x
    # faster than max with indices here.
    winners = torch.empty(pooled.shape, dtype=torch.long, device=qkv.device) \
        if winners_too else None
    _pool_heads(qkv, heads, key_bias, query_mask, scale, pooled, winners)
    alive = _alive(key_mask, query_mask)
    if alive is not None:
        pooled.mul_(alive[:, None, None])  # no key or no query: zeros
    return pooled, key_bias, alive, winners


class _SelfAttentionMaxPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, heads: int,
                key_mask: Tensor | None, query_mask: Tensor | None, scale: float,
                for_backward: bool) -> Tensor:
        b, t, _ = x.shape
        d = weight.shape[0] // (3 * heads)
        with _label("attnkit.qkv_projection"):
            qkv = torch.nn.functional.linear(x, weight, bias)  # one matmul for Q, K and V
        pooled, key_bias, alive, winners = _attend_and_pool(qkv, heads, d, key_mask, query_mask,
                                                            scale, for_backward)
        if for_backward:
            ctx.save_for_backward(x, weight, qkv, key_bias, alive, winners)
        ctx.heads, ctx.scale, ctx.has_bias = heads, scale, bias is not None
        return pooled.view(b, heads * d)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight, qkv, key_bias, alive, winners = ctx.saved_tensors
        heads, scale = ctx.heads, ctx.scale
        b, t, dim = x.shape
        d = weight.shape[0] // (3 * heads)
        inner = heads * d
        grad = grad.reshape(b, heads, d)
        if alive is not None:
            grad = grad * alive[:, None, None]
        with _label("attnkit.attention_heads"):
            # [b, heads, t, d] copies, once: both are read by several batched matmuls below.
            q, k, v = qkv.view(b, t, 3, heads, d).permute(2, 0, 3, 1, 4)
            k, v_t = k.contiguous(), v.permute(0, 1, 3, 2).contiguous()  # v_t [b, heads, d, t]
            # The winners' query rows and their attention rows, recomputed: [b, heads, d, *].
            q_win = q.gather(2, winners.unsqueeze(-1).expand(-1, -1, -1, d))
            scores = torch.matmul(q_win, k.transpose(-1, -2)).mul_(scale)
        with _label("attnkit.softmax"):
            if key_bias is not None:
                scores.add_(key_bias[:, None, None, :])
            # In float32 also under autocast (as autocast's softmax backward): v - pooled
            # cancels, and in bf16 it would keep ~2 digits.
            wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
            p = torch.softmax(scores, -1, dtype=wide)  # row j = P[winner of j]
            v32 = v_t.to(wide)
            pooled = (p * v32).sum(-1, keepdim=True)  # p . v[:, j], as the forward's max
            gp = p.mul_(grad.to(wide).unsqueeze(-1))  # g_j p  (p is not needed any more)
            ds = (v32 - pooled).mul_(gp)  # [b, heads, d, t]: d loss / d scores of row q_j
            gp, ds = gp.to(x.dtype), ds.to(x.dtype)  # the matmuls run in the kernel's dtype
        with _label("attnkit.attention_heads"):
            # Keys and values: dense, written in the packed projection's [b, t, 2, heads, d].
            grad_kv = x.new_empty(b, t, 2, heads, d)
            grad_kv[:, :, 0].copy_(torch.matmul(ds.transpose(-1, -2), q_win.mul_(scale))
                                   .transpose(1, 2))
            grad_kv[:, :, 1].copy_(gp.permute(0, 3, 1, 2))
            grad_kv = grad_kv.view(b * t, 2 * inner)
            # Queries: only the winners' rows ([b, heads, d] rows of d each), per head.
            grad_q_win = torch.matmul(ds, k).mul_(scale)  # [b, heads, d, d]
            gq = grad_q_win.transpose(0, 1).reshape(heads, b * d, d)
        # Row of x of every (head, sample, feature) winner, in gq's order.
        rows = (winners + torch.arange(b, device=x.device)[:, None, None] * t)
        rows = rows.transpose(0, 1).reshape(-1)
        x_flat = x.reshape(b * t, dim)
        w_q, w_kv = weight[:inner], weight[inner:]
        grad_x = grad_weight = grad_bias = None
        with _label("attnkit.qkv_projection"):
            if ctx.needs_input_grad[0]:
                grad_x = torch.mm(grad_kv, w_kv)
                # each winner row's query gradient through its head's W_q [d, dim]
                grad_x.index_add_(0, rows, torch.bmm(gq, w_q.view(heads, d, dim)).view(-1, dim))
                grad_x = grad_x.view(b, t, dim)
            if ctx.needs_input_grad[1]:
                x_win = x_flat.index_select(0, rows).view(heads, b * d, dim)
                grad_weight = torch.cat([torch.bmm(gq.transpose(1, 2), x_win).view(inner, dim),
                                         torch.mm(grad_kv.t(), x_flat)])
            if ctx.has_bias and ctx.needs_input_grad[2]:
                grad_bias = torch.cat([gq.sum(1).view(inner), grad_kv.sum(0)])
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


def _checked(b: int, t: int, d: int, key_mask: Tensor | None, query_mask: Tensor | None,
             scale: float | None) -> float:
    """The scale (None: ``1 / sqrt(d)``), once the masks are checked to be bool ``[b, t]``."""
    for name, mask in (("key_mask", key_mask), ("query_mask", query_mask)):
        if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != (b, t)):
            raise ValueError(f"{name} must be a bool tensor [{b}, {t}] (True = real), got "
                             f"{mask.dtype} {tuple(mask.shape)}")
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def self_attention_max_pool(x: Tensor, weight: Tensor, bias: Tensor | None = None, *,
                            num_heads: int, key_mask: Tensor | None = None,
                            query_mask: Tensor | None = None,
                            scale: float | None = None) -> Tensor:
    """Multi-head self-attention over ``x [batch, T, dim]`` (the packed ``W_q; W_k; W_v``
    ``weight [3 * num_heads * d, dim]``, ``bias``, no output projection; ``scale`` None: ``1 /
    sqrt(d)``), then the max of each context feature over the real queries -> ``[batch,
    num_heads * d]`` (head-major), zeros for a row without a real key or query (``key_mask``,
    ``query_mask [batch, T]`` bool, True = real).
    """
    if x.dim() != 3 or weight.dim() != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(f"x must be [batch, T, dim] and weight [3*inner, dim], got "
                         f"{tuple(x.shape)} and {tuple(weight.shape)}")
    if num_heads <= 0 or weight.shape[0] % (3 * num_heads):
        raise ValueError(f"weight has {weight.shape[0]} rows, not 3 * num_heads * d for "
                         f"num_heads={num_heads}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be [{weight.shape[0]}], got {tuple(bias.shape)}")
    b, t = x.shape[:2]
    d = weight.shape[0] // (3 * num_heads)
    scale = _checked(b, t, d, key_mask, query_mask, scale)
    if b == 0 or t == 0:  # nothing to attend to: zeros (still a function of the inputs)
        return x.new_zeros(b, num_heads * d) + 0 * (x.sum() + weight.sum())
    for_backward = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight, bias))
    args = (num_heads, _drop_full(key_mask), _drop_full(query_mask), scale, for_backward)
    device = x.device.type
    if not torch.is_autocast_enabled(device):
        return _SelfAttentionMaxPool.apply(x, weight, bias, *args)
    # Under autocast the whole kernel runs in the autocast dtype (matmuls as autocast would,
    # softmax normalised in float32); the casts carry the gradients back to the parameters'.
    dtype = torch.get_autocast_dtype(device)
    with torch.autocast(device, enabled=False):
        return _SelfAttentionMaxPool.apply(x.to(dtype), weight.to(dtype),
                                           None if bias is None else bias.to(dtype), *args)


def max_pool_projected(qkv: Tensor, *, num_heads: int, key_mask: Tensor | None = None,
                       query_mask: Tensor | None = None, scale: float | None = None) -> Tensor:
    """`self_attention_max_pool` from its packed projection ``qkv [batch, T, 3 * num_heads * d]``
    (``x W^T + bias``; the sentiment model gathers it from tables), for inference: no gradient.
    """
    if qkv.dim() != 3 or num_heads <= 0 or qkv.shape[-1] % (3 * num_heads):
        raise ValueError(f"qkv must be [batch, T, 3 * num_heads * d], got {tuple(qkv.shape)} "
                         f"for num_heads={num_heads}")
    if torch.is_grad_enabled() and qkv.requires_grad:
        raise ValueError("max_pool_projected computes no gradient: run it under "
                         "torch.no_grad(), or self_attention_max_pool for training")
    b, t = qkv.shape[:2]
    d = qkv.shape[-1] // (3 * num_heads)
    scale = _checked(b, t, d, key_mask, query_mask, scale)
    if b == 0 or t == 0:
        return qkv.new_zeros(b, num_heads * d)
    pooled = _attend_and_pool(qkv, num_heads, d, _drop_full(key_mask), _drop_full(query_mask),
                              scale, winners_too=False)[0]
    return pooled.view(b, num_heads * d)
