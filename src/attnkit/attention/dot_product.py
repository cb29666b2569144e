"""Dot-product attention (Luong "dot", Vaswani scaled) with a fused SDPA fast path.

``score(q_i, k_j) = q_i . k_j * scale``, ``scale = 1/sqrt(dim)`` (scaled) or ``1`` (dot). With
``need_weights=True`` the explicit ``masked_softmax(Q K^T * scale) V``; otherwise
`fused_attention` (SDPA, no ``[Tq, Tk]`` matrix kept, rows without a key made exactly zero).
The two agree to 1e-5 in float32 (docs/concepts.md, "The fused path").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attnkit.attention.base import (
    AttentionMemory,
    AttentionOutput,
    ScoreAttention,
    _shape,
    build_mask,
    check_inputs,
    query_mask_from_lengths,
)
from attnkit.attention.masking import causal_mask, masked_softmax


def fused_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
                    causal_only: bool = False, scale: float | None = None,
                    dropout_p: float = 0.0, query_mask: Tensor | None = None) -> Tensor:
    """SDPA with attnkit's mask semantics: empty rows give zeros, never NaN.

    ``query [..., Tq, dk]``, ``key [..., Tk, dk]``, ``value [..., Tk, dv]`` -> ``[..., Tq, dv]``.
    ``mask`` broadcasts to ``[..., Tq, Tk]`` (True = may attend); ``causal_only`` (no mask) lets
    SDPA use ``is_causal``; ``scale`` None = ``1/sqrt(dk)``; ``query_mask`` (``[..., Tq, 1]``)
    zeroes padded query rows.
    """
    if key.shape[-2] == 0:  # nothing to attend to: every row is empty
        return query.new_zeros(*query.shape[:-1], value.shape[-1])
    if query.dim() == 3:
        # SDPA's fused CPU kernels take [batch, heads, T, dim] only; 3-D inputs would fall back
        # to the math kernel, which keeps the [Tq, Tk] weights for backward.
        q, k, v, m, keep = (None if t is None else t.unsqueeze(1)
                            for t in (query, key, value, mask, query_mask))
        return fused_attention(q, k, v, m, causal_only=causal_only, scale=scale,
                               dropout_p=dropout_p, query_mask=keep).squeeze(1)
    keep = query_mask
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)  # [..., Tq|1, 1]
        # On CPU the check is free (no device sync) and saves two passes when no row is empty;
        # a compiled graph fuses the two passes instead of reading the answer back.
        if mask.device.type != "cpu" or torch.compiler.is_compiling() or not bool(
                has_key.all()):
            # An empty row attends to every key instead (finite); its output is zeroed below.
            mask = mask | ~has_key
            keep = has_key if keep is None else keep & has_key
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout_p,
        is_causal=causal_only and mask is None, scale=scale,
    )
    if keep is not None:
        out = out * keep.to(out.dtype)
    return out


def dot_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
                  causal_only: bool, need_weights: bool, scale: float | None = None,
                  dropout_p: float = 0.0, query_mask: Tensor | None = None
                  ) -> tuple[Tensor, Tensor | None]:
    """``(context, weights or None)`` over ``[..., T, dim]``: `fused_attention` without the
    weights, else the explicit masked softmax (dropout on the context only, so the weights are
    the model's). ``query_mask [..., Tq]`` zeroes padded queries.
    """
    if not need_weights:
        keep = None if query_mask is None else query_mask.unsqueeze(-1)
        return fused_attention(query, key, value, mask, causal_only=causal_only, scale=scale,
                               dropout_p=dropout_p, query_mask=keep), None
    if causal_only:
        mask = causal_mask(query.shape[-2], key.shape[-2], query.device)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    weights = masked_softmax(torch.matmul(query, key.transpose(-2, -1)) * scale, mask)
    if query_mask is not None:
        weights = weights * query_mask.unsqueeze(-1)
    used = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return torch.matmul(used.to(value.dtype), value), weights


class DotProductAttention(ScoreAttention):
    """Scaled dot-product attention (Vaswani et al. 2017) or Luong's "dot" score (``scaled=False``).

    The common call (`attnkit.attention.base`); ``dropout`` applies to the weights in training;
    the weights returned are those before dropout.
    """

    def __init__(self, scaled: bool = True, dropout: float = 0.0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.scaled = scaled
        self.dropout = dropout

    def extra_repr(self) -> str:
        return f"scaled={self.scaled}, dropout={self.dropout}"

    def _scale(self, dim: int) -> float:
        return 1.0 / math.sqrt(dim) if self.scaled else 1.0

    @staticmethod
    def _check_dims(query: Tensor, key: Tensor) -> None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(f"dot-product attention needs query and key of the same feature "
                             f"size: query [batch, Tq, {key.shape[-1]}] for key {_shape(key)}, "
                             f"got {_shape(query)}")

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:
        """``query [batch, Tq, dim]``, ``keys [batch, Tk, dim]`` -> ``[batch, Tq, Tk]``."""
        self._check_dims(query, keys)
        return torch.bmm(query, keys.transpose(1, 2)) * self._scale(query.shape[-1])

    def attend(self, query: Tensor, memory: AttentionMemory, *,
               query_lengths: Tensor | None = None, attn_mask: Tensor | None = None,
               causal: bool = False, need_weights: bool = False) -> AttentionOutput:
        """Attend from ``query [batch, Tq, dim]`` over a precomputed ``memory`` (see base)."""
        check_inputs(query, memory.raw_keys, memory.values)
        self._check_dims(query, memory.keys)
        batch, tq, tk = query.shape[0], query.shape[1], memory.values.shape[1]
        only_causal = causal and memory.key_mask is None and attn_mask is None
        mask = build_mask(batch, tq, tk, key_mask=memory.key_mask, attn_mask=attn_mask,
                          causal=causal and not only_causal, device=query.device)
        return AttentionOutput(*dot_attention(
            query, memory.keys, memory.values, mask, causal_only=only_causal,
            need_weights=need_weights, scale=self._scale(query.shape[-1]),
            dropout_p=self.dropout if self.training else 0.0,
            query_mask=query_mask_from_lengths(query_lengths, batch, tq, query.device)))
