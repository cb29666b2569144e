"""Multi-head attention: Vaswani et al. 2017, and the 2018 Keras layer of Su Jianlin.

``head_h = Attention(Q W_q^h, K W_k^h, V W_v^h)`` (scaled dot product), the heads concatenated,
then optionally projected back (``out_proj=True``); `MultiHeadAttention.keras_2018` is the Keras
``Attention(nb_head, size_per_head)`` layer. Parameters follow ``torch.nn.MultiheadAttention``
(a packed ``in_proj_weight`` when query, key and value sizes are equal), so
`MultiHeadAttention.from_torch` loads its weights one to one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.attention.base import (
    AttentionOutput,
    build_mask,
    check_inputs,
    query_mask_from_lengths,
)
from attnkit.attention.dot_product import dot_attention
from attnkit.attention.kv_cache import KeyValueCache, SourceKeyValues
from attnkit.attention.masking import causal_mask
from attnkit.attention.pooling import self_attention_max_pool
from attnkit.positional import RotaryEmbedding

# Incremental attention of at most FEW_QUERIES queries per row over at least MANY_MATRICES
# (row, head) pairs runs as two batched matmuls rather than SDPA (`_attend_heads`).
FEW_QUERIES, MANY_MATRICES = 8, 64


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with separate query/key/value sizes.

    Args:
        query_dim, key_dim, value_dim: feature sizes (``key_dim`` defaults to ``query_dim``,
            ``value_dim`` to ``key_dim``).
        num_heads, head_dim: heads and size per head (default ``query_dim // num_heads``).
        bias: biases in the input projections and ``out_proj``.
        dropout: dropout on the attention weights (training only).
        out_proj: project the concatenated heads back to ``query_dim``; ``False`` returns the
            ``num_heads * head_dim`` concatenation (Keras 2018 layer).
        rope, rope_base: rotary positions (`attnkit.positional.RotaryEmbedding`) on every head's
            queries and keys; ``forward`` then takes ``query_positions``/``key_positions``.

    The common call (`attnkit.attention.base`) -> ``context [batch, Tq, out_dim]``, ``weights
    [batch, heads, Tq, Tk]`` (before dropout). Incremental decoding: `attend_cached` and
    `attend_source`.
    """

    def __init__(self, query_dim: int, key_dim: int | None = None, value_dim: int | None = None,
                 num_heads: int = 8, head_dim: int | None = None, bias: bool = True,
                 dropout: float = 0.0, out_proj: bool = True, rope: bool = False,
                 rope_base: float = 10000.0):
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        value_dim = key_dim if value_dim is None else value_dim
        if min(query_dim, key_dim, value_dim, num_heads) <= 0:
            raise ValueError(f"sizes must be positive, got query_dim={query_dim}, "
                             f"key_dim={key_dim}, value_dim={value_dim}, num_heads={num_heads}")
        if head_dim is None:
            if query_dim % num_heads:
                raise ValueError(f"query_dim={query_dim} is not divisible by num_heads="
                                 f"{num_heads}; pass head_dim explicitly")
            head_dim = query_dim // num_heads
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.num_heads, self.head_dim, self.dropout = num_heads, head_dim, dropout
        self.inner_dim = inner = num_heads * head_dim
        self.out_dim = query_dim if out_proj else inner
        self.packed = query_dim == key_dim == value_dim
        if self.packed:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * inner, query_dim))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = nn.Parameter(torch.empty(inner, query_dim))
            self.k_proj_weight = nn.Parameter(torch.empty(inner, key_dim))
            self.v_proj_weight = nn.Parameter(torch.empty(inner, value_dim))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * inner))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(inner, query_dim, bias=bias) if out_proj else None
        self.rope = RotaryEmbedding(head_dim, rope_base) if rope else None
        self.reset_parameters()

    @classmethod
    def keras_2018(cls, nb_head: int, size_per_head: int, query_dim: int,
                   key_dim: int | None = None, value_dim: int | None = None) -> MultiHeadAttention:
        """The 2018 Keras ``Attention(nb_head, size_per_head)`` layer: no bias, no out_proj."""
        return cls(query_dim, key_dim, value_dim, num_heads=nb_head, head_dim=size_per_head,
                   bias=False, out_proj=False)

    def reset_parameters(self) -> None:
        """Glorot-uniform ``W_q, W_k, W_v`` (each on its own, as Keras), zero biases."""
        for w in self._proj_weights():
            with torch.no_grad():
                # xavier_uniform_ on a slice of the packed matrix: each projection gets
                # fan_in=dim, fan_out=inner, not the 3*inner of the packed shape.
                bound = math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
                w.uniform_(-bound, bound)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
        if self.out_proj is not None and self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    def extra_repr(self) -> str:
        return (f"query_dim={self.query_dim}, key_dim={self.key_dim}, value_dim={self.value_dim},"
                f" num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"bias={self.in_proj_bias is not None}, dropout={self.dropout}")

    def _proj_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        if self.packed:
            return tuple(self.in_proj_weight.split(self.inner_dim))  # views, no copy
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _proj_biases(self) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        if self.in_proj_bias is None:
            return None, None, None
        return tuple(self.in_proj_bias.split(self.inner_dim))

    def _heads(self, x: Tensor, n: int) -> tuple[Tensor, ...]:
        """``[batch, T, n*inner]`` -> n views ``[batch, heads, T, head_dim]`` (no copy)."""
        b, t = x.shape[:2]
        # unbind, not tuple(): iterating a tensor goes through Python.
        return x.view(b, t, n, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        if self.packed and query is key and key is value:  # self-attention: one matmul
            return self._heads(F.linear(query, self.in_proj_weight, self.in_proj_bias), 3)
        return (*self._heads(self._query(query), 1), *self._project_kv(key, value))

    def _query(self, x: Tensor) -> Tensor:
        return F.linear(x, self._proj_weights()[0], self._proj_biases()[0])

    def _project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        if self.packed and key is value:  # one matmul for both
            bias = None if self.in_proj_bias is None else self.in_proj_bias[self.inner_dim:]
            return self._heads(F.linear(key, self.in_proj_weight[self.inner_dim:], bias), 2)
        (_, wk, wv), (_, bk, bv) = self._proj_weights(), self._proj_biases()
        return (*self._heads(F.linear(key, wk, bk), 1), *self._heads(F.linear(value, wv, bv), 1))

    def forward(self, query: Tensor, key: Tensor, value: Tensor | None = None, *,
                key_lengths: Tensor | None = None, key_mask: Tensor | None = None,
                query_lengths: Tensor | None = None, attn_mask: Tensor | None = None,
                causal: bool = False, need_weights: bool = False,
                query_positions: Tensor | None = None,
                key_positions: Tensor | None = None) -> AttentionOutput:
        value = key if value is None else value
        check_inputs(query, key, value, query_dim=self.query_dim, key_dim=self.key_dim,
                     value_dim=self.value_dim)
        if self.rope is None and (query_positions is not None or key_positions is not None):
            raise ValueError("query_positions/key_positions need rope=True")
        batch, tq, tk = query.shape[0], query.shape[1], key.shape[1]
        qmask = query_mask_from_lengths(query_lengths, batch, tq, query.device)
        only_causal = causal and key_lengths is None and key_mask is None and attn_mask is None
        mask = build_mask(batch, tq, tk, key_lengths=key_lengths, key_mask=key_mask,
                          attn_mask=attn_mask, causal=causal and not only_causal,
                          num_heads=self.num_heads, device=query.device)
        q, k, v = self._project(query, key, value)
        if self.rope is not None:
            q, k = self.rope(q, query_positions), self.rope(k, key_positions)
        ctx, weights = dot_attention(
            q, k, v, mask, causal_only=only_causal, need_weights=need_weights,
            dropout_p=self.dropout if self.training else 0.0,
            query_mask=None if qmask is None or not need_weights else qmask[:, None])
        out = self._output(ctx.transpose(1, 2).reshape(batch, tq, self.inner_dim))
        if qmask is not None:
            out = out * qmask.unsqueeze(-1).to(out.dtype)
        return AttentionOutput(out, weights)

    def max_pool(self, x: Tensor, *, key_mask: Tensor | None = None,
                 query_mask: Tensor | None = None) -> Tensor:
        """Self-attention over ``x [batch, T, query_dim]`` then the max over the real queries
        (``query_mask``) -> ``[batch, out_dim]``: `self_attention_max_pool` for the 2018 Keras
        layer (no output projection, rope or dropout), else `forward` then the max."""
        if self.packed and self.out_proj is None and self.rope is None and not (
                self.training and self.dropout > 0):
            check_inputs(x, x, x, query_dim=self.query_dim)
            return self_attention_max_pool(x, self.in_proj_weight, self.in_proj_bias,
                                           num_heads=self.num_heads, key_mask=key_mask,
                                           query_mask=query_mask,
                                           scale=1.0 / math.sqrt(self.head_dim))
        ctx = self(x, x, key_mask=key_mask).context
        if query_mask is not None:
            ctx = ctx.masked_fill(~query_mask.unsqueeze(-1), torch.finfo(ctx.dtype).min)
        pooled = ctx.max(dim=1).values
        return pooled if query_mask is None else pooled * query_mask.any(-1, keepdim=True)

    # --- incremental decoding -----------------------------------------------------------------

    def start_cache(self, rows: int, capacity: int, like: Tensor) -> KeyValueCache:
        """An empty self-attention cache for ``rows`` sequences, room for ``capacity``
        positions (it grows by doubling), in the dtype and device of ``like``."""
        return KeyValueCache.empty(rows, self.num_heads, self.head_dim, capacity, like)

    def attend_cached(self, x: Tensor, cache: KeyValueCache, *,
                      need_weights: bool = False) -> AttentionOutput:
        """Causal self-attention of new positions ``x [rows, t, query_dim]`` over all so far
        (appended to ``cache``), as `forward` with ``causal=True`` over the whole sequence ->
        context ``[rows, t, out_dim]``, weights ``[rows, heads, t, cache.length]``."""
        self._check_incremental("attend_cached", x)
        rows, t = x.shape[:2]
        start = cache.length
        q, k, v = self._heads(F.linear(x, self.in_proj_weight, self.in_proj_bias), 3)
        if self.rope is not None:
            positions = torch.arange(start, start + t, device=x.device)
            q, k = self.rope(q, positions), self.rope(k, positions)
        keys, values = cache.append(k, v)
        # The newest position sees every key: one new position needs no mask at all.
        mask = None if t == 1 else causal_mask(t, start + t, x.device, offset=start)
        ctx, weights = self._attend_heads(q, keys, values, mask, need_weights)
        out = ctx.transpose(1, 2).reshape(rows, t, self.inner_dim)
        return AttentionOutput(self._output(out), weights)

    def source_keys_values(self, source: Tensor, key_lengths: Tensor | None = None
                           ) -> SourceKeyValues:
        """Project ``source [sentences, S, key_dim]`` once for `attend_source`, with its mask."""
        self._check_incremental("source_keys_values", source, self.key_dim)
        n, length = source.shape[:2]
        k, v = self._project_kv(source, source)
        mask = empty = None
        if key_lengths is not None and bool((key_lengths < length).any()):
            mask = build_mask(n, 1, length, key_lengths=key_lengths, num_heads=self.num_heads,
                              device=source.device)
            has_key = mask.any(dim=-1, keepdim=True)
            if not bool(has_key.all()):
                # An empty sentence attends to every key (finite numbers); its context is
                # zeroed afterwards, so it reads exactly zero, never NaN.
                empty, mask = ~has_key, mask | ~has_key
        return SourceKeyValues(k.contiguous(), v.contiguous(), mask, empty)

    def attend_source(self, x: Tensor, source: SourceKeyValues, *,
                      need_weights: bool = False) -> AttentionOutput:
        """Cross-attention of ``x [sentences * g, t, query_dim]`` (a sentence's ``g`` beams) over
        its one copy of the source -> ``[sentences * g, t, out_dim]``, weights ``[sentences * g,
        heads, t, S]``."""
        self._check_incremental("attend_source", x)
        n, h, length, hd = source.keys.shape
        rows, t = x.shape[:2]
        if rows % n:
            raise ValueError(f"x has {rows} rows, not a multiple of the {n} sentences")
        g = rows // n
        # [n*g, t, h*hd] -> [n, h, g*t, hd]: a sentence's hypotheses are its queries.
        q = self._query(x).view(n, g, t, h, hd).permute(0, 3, 1, 2, 4).reshape(n, h, g * t, hd)
        ctx, weights = self._attend_heads(q, source.keys, source.values, source.mask,
                                          need_weights)
        if source.empty is not None:
            ctx = ctx.masked_fill(source.empty, 0.0)
            weights = None if weights is None else weights.masked_fill(source.empty, 0.0)
        out = ctx.view(n, h, g, t, hd).permute(0, 2, 3, 1, 4).reshape(rows, t, self.inner_dim)
        if weights is not None:
            weights = weights.view(n, h, g, t, length).transpose(1, 2).reshape(rows, h, t, length)
        return AttentionOutput(self._output(out), weights)

    def _attend_heads(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                      need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Scaled dot-product over ``[batch, heads, T, head_dim]``; every row has a key.

        Without weights: the fused kernel, or two batched matmuls for many rows of a few queries
        (decoding a batch), where its set-up per (row, head) dominates (docs/results.md).
        """
        scale = 1.0 / math.sqrt(self.head_dim)
        if not need_weights:
            if q.shape[-2] > FEW_QUERIES or q.shape[0] * q.shape[1] < MANY_MATRICES:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
            scores = torch.matmul(q, k.transpose(-2, -1)).mul_(scale)
            if mask is not None:
                scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
            return torch.matmul(torch.softmax(scores, dim=-1), v), None
        return dot_attention(q, k, v, mask, causal_only=False, need_weights=True)

    def _output(self, out: Tensor) -> Tensor:
        return out if self.out_proj is None else self.out_proj(out)

    def _check_incremental(self, method: str, x: Tensor, dim: int | None = None) -> None:
        dim = self.query_dim if dim is None else dim
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != dim:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{method} needs [rows, time, {dim}], got {got}")
        if method != "attend_cached" and self.rope is not None:
            raise ValueError(f"{method}: rotary positions are for self-attention; a "
                             "cross-attention module has rope=False")
        if method == "attend_cached" and not self.packed:
            raise ValueError("attend_cached is self-attention: it needs equal query, key and "
                             "value sizes")

    # --- torch.nn.MultiheadAttention interoperability -----------------------------------------

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A MultiHeadAttention with the weights of ``mha`` (batch-first; not ``add_bias_kv``)."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise ValueError(f"expected torch.nn.MultiheadAttention, got {type(mha).__name__}")
        ref = next(mha.parameters())
        module = cls(mha.embed_dim, mha.kdim, mha.vdim, num_heads=mha.num_heads,
                     bias=mha.in_proj_bias is not None, dropout=mha.dropout, out_proj=True)
        module.to(device=ref.device, dtype=ref.dtype)
        module.load_torch_weights(mha)
        return module

    def load_torch_weights(self, mha: nn.MultiheadAttention) -> None:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` of the same sizes into self."""
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("nn.MultiheadAttention with add_bias_kv or add_zero_attn is not "
                             "supported")
        want = (self.query_dim, self.key_dim, self.value_dim, self.num_heads, self.inner_dim)
        got = (mha.embed_dim, mha.kdim, mha.vdim, mha.num_heads, mha.embed_dim)
        if want != got or self.out_proj is None:
            raise ValueError(f"size mismatch: this module has (query_dim, key_dim, value_dim, "
                             f"num_heads, inner_dim)={want} with out_proj, the torch module "
                             f"{got}")
        if (self.in_proj_bias is None) != (mha.in_proj_bias is None):
            raise ValueError(f"bias mismatch: this module bias={self.in_proj_bias is not None},"
                             f" the torch module bias={mha.in_proj_bias is not None}")
        self.load_state_dict(mha.state_dict())
