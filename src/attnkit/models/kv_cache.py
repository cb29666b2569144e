"""The key/value cache of incremental Transformer decoding, and attention over it.

Decoding one token at a time, a decoder layer needs at step ``t`` the self-attention keys and
values of positions ``0..t`` and the cross-attention keys and values of the source. Without a
cache both are recomputed every step (the whole prefix goes through every layer again, and the
source is projected again): ``O(t)`` work per step for what is ``O(1)`` new information. With
`LayerCache` the source keys/values are projected once per sentence (at ``encode``) and
each step appends one key/value row per layer.

The cache is a value, not module state: `TransformerSeq2Seq.decode_step` takes it in the
decoding state and returns a new one; beam search reorders it with `LayerCache.reorder`.

The functions read the projection weights of an `attnkit.attention.MultiHeadAttention`
(``in_proj_weight`` packed ``[W_q; W_k; W_v]``, ``in_proj_bias``, ``out_proj``), so cached and
uncached decoding share one set of parameters and give the same numbers.

Example:
    ```python
    k, v = project_memory(layer.cross_attn, memory)                  # once per sentence
    cache = LayerCache(k.new_zeros(b, h, 0, hd), k.new_zeros(b, h, 0, hd), k, v)
    out, cache, _ = cached_self_attention(layer.self_attn, x, cache)  # x [batch, 1, d]
    ```
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attnkit.attention.dot_product import fused_attention
from attnkit.attention.masking import masked_softmax
from attnkit.attention.multi_head import MultiHeadAttention


@dataclass
class LayerCache:
    """One decoder layer's cached keys and values, all ``[batch, heads, time, head_dim]``.

    Attributes:
        self_keys, self_values: self-attention keys/values of the target positions so far.
        cross_keys, cross_values: the source (encoder memory) projected once per sentence.
    """

    self_keys: Tensor
    self_values: Tensor
    cross_keys: Tensor
    cross_values: Tensor

    def reorder(self, index: Tensor) -> LayerCache:
        """Select batch rows ``index [new_batch]`` (beam search, dropping finished sentences)."""
        return LayerCache(*(t.index_select(0, index) for t in (
            self.self_keys, self.self_values, self.cross_keys, self.cross_values)))


def _split_heads(mha: MultiHeadAttention, x: Tensor) -> Tensor:
    """``[batch, T, heads * head_dim]`` -> ``[batch, heads, T, head_dim]``."""
    b, t = x.shape[:2]
    return x.view(b, t, mha.num_heads, mha.head_dim).transpose(1, 2)


def _rows(mha: MultiHeadAttention, part: slice) -> tuple[Tensor, Tensor | None]:
    """Rows ``part`` of the packed input projection (weight, bias)."""
    bias = None if mha.in_proj_bias is None else mha.in_proj_bias[part]
    return mha.in_proj_weight[part], bias


def _check(mha: MultiHeadAttention) -> None:
    if not mha.packed or mha.out_proj is None or mha.rope is not None:
        raise ValueError("cached decoding needs a MultiHeadAttention with equal query/key/value "
                         "sizes, an output projection and no rotary positions")


def _merge(mha: MultiHeadAttention, ctx: Tensor) -> Tensor:
    """``[batch, heads, T, head_dim]`` -> the projected output ``[batch, T, d]``."""
    b, _, t, _ = ctx.shape
    return mha.out_proj(ctx.transpose(1, 2).reshape(b, t, mha.inner_dim))


def project_memory(mha: MultiHeadAttention, memory: Tensor) -> tuple[Tensor, Tensor]:
    """Cross-attention keys and values of the source, once per sentence.

    Args:
        mha: the cross-attention module.
        memory: encoder output ``[batch, S, d]``.

    Returns:
        ``(keys, values)``, each ``[batch, heads, S, head_dim]``.
    """
    _check(mha)
    inner = mha.inner_dim
    kv = F.linear(memory, *_rows(mha, slice(inner, 3 * inner)))
    keys, values = kv.split(inner, dim=-1)
    return _split_heads(mha, keys), _split_heads(mha, values)


def _attend(mha: MultiHeadAttention, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
            need_weights: bool) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention; the explicit softmax only when weights are wanted."""
    if not need_weights:
        return fused_attention(q, k, v, mask), None
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(mha.head_dim))
    weights = masked_softmax(scores, mask)
    return torch.matmul(weights, v), weights


def cached_self_attention(mha: MultiHeadAttention, x: Tensor,
                          cache: LayerCache) -> tuple[Tensor, LayerCache]:
    """Self-attention of the newest position over every position so far.

    Args:
        mha: the self-attention module.
        x: the (normalised) newest position ``[batch, 1, d]``.
        cache: this layer's cache before the step.

    Returns:
        ``(output [batch, 1, d], cache with the new key/value row appended)``. The query is the
        last position, so the causal mask allows every cached key: no mask is needed.
    """
    _check(mha)
    q, k, v = (_split_heads(mha, t) for t in
               F.linear(x, mha.in_proj_weight, mha.in_proj_bias).split(mha.inner_dim, dim=-1))
    keys = torch.cat([cache.self_keys, k], dim=2)
    values = torch.cat([cache.self_values, v], dim=2)
    ctx, _ = _attend(mha, q, keys, values, None, need_weights=False)
    new_cache = LayerCache(keys, values, cache.cross_keys, cache.cross_values)
    return _merge(mha, ctx), new_cache


def cached_cross_attention(mha: MultiHeadAttention, x: Tensor, cache: LayerCache,
                           key_mask: Tensor, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    """Cross-attention of ``x [batch, 1, d]`` over the cached source keys/values.

    Args:
        key_mask: ``[batch, 1, 1, S]`` bool, True = real source position.
        need_weights: also return the weights ``[batch, heads, 1, S]`` (explicit softmax);
            otherwise the fused kernel runs and the weights are None.
    """
    q = _split_heads(mha, F.linear(x, *_rows(mha, slice(0, mha.inner_dim))))
    ctx, weights = _attend(mha, q, cache.cross_keys, cache.cross_values, key_mask, need_weights)
    return _merge(mha, ctx), weights
