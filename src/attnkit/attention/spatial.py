"""Soft spatial attention over an image feature map (Xu et al., 2015, "Show, Attend and Tell").

A decoder state ``h`` attends over the ``height * width`` locations of a feature map ``a`` with
the additive score ``v^T tanh(W_q h + W_k a_l + b)``; the optional gate ``beta = sigmoid(W_b h)``
(the paper's "doubly stochastic" section) scales the context so the model can attend less.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.additive import AdditiveAttention
from attnkit.attention.base import (
    AttentionMemory,
    AttentionOutput,
    TwoStepAttention,
    build_mask,
)


@dataclass
class SpatialMemory(AttentionMemory):
    """`AttentionMemory` of a flattened feature map ``[batch, H*W, ...]`` and its ``H, W``."""

    height: int = 0
    width: int = 0


def _flatten_map(name: str, t: Tensor, batch: int | None = None,
                 hw: tuple[int, int] | None = None, channels: int | None = None) -> Tensor:
    """``[batch, C, H, W]`` -> ``[batch, H*W, C]``, raising a ValueError naming the shape."""
    if not isinstance(t, Tensor) or t.dim() != 4 or not t.dtype.is_floating_point:
        got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
        raise ValueError(f"{name} must be a floating tensor [batch, channels, height, width], "
                         f"got {got}")
    if channels is not None and t.shape[1] != channels:
        raise ValueError(f"{name} must have shape [batch, {channels}, height, width], "
                         f"got {tuple(t.shape)}")
    if batch is not None and (t.shape[0] != batch or tuple(t.shape[2:]) != hw):
        raise ValueError(f"{name} must have shape [{batch}, channels, {hw[0]}, {hw[1]}] "
                         f"(like key), got {tuple(t.shape)}")
    return t.flatten(2).transpose(1, 2)


class SpatialAttention(TwoStepAttention):
    """Soft attention of a query over the locations of a feature map, with an optional gate.

    Args:
        query_dim: size of the decoder state.
        channels: channels ``C`` of the key feature map.
        units: hidden size of the additive score.
        gate: multiply the context by ``beta = sigmoid(W_b h)`` (one scalar per query).
        memory_budget_mb: passed to the additive score (blocks long inputs).

    Shapes: query ``[batch, Tq, query_dim]`` or ``[batch, query_dim]``; key ``[batch, C, H,
    W]``; value ``[batch, Cv, H, W]`` (default key); masks ``[batch, H, W]`` / ``[batch, Tq, H,
    W]`` or flattened (no ``key_lengths`` or ``causal``) -> context ``[batch, (Tq,) Cv]``,
    weights ``[batch, (Tq,) H, W]``.
    """

    def __init__(self, query_dim: int, channels: int, units: int, gate: bool = True, *,
                 memory_budget_mb: float = 64.0):
        super().__init__()
        self.query_dim = query_dim
        self.channels = channels
        self.score = AdditiveAttention(query_dim, channels, units,
                                       memory_budget_mb=memory_budget_mb)
        self.gate = nn.Linear(query_dim, 1) if gate else None

    def memory(self, key: Tensor, value: Tensor | None = None, *,
               key_lengths: Tensor | None = None,
               key_mask: Tensor | None = None) -> SpatialMemory:
        """Project the feature map once: ``key [batch, C, H, W]`` -> `SpatialMemory`."""
        if key_lengths is not None:
            raise ValueError("key_lengths has no meaning for a feature map; pass key_mask "
                             "[batch, height, width] instead")
        keys = _flatten_map("key", key, channels=self.channels)
        batch, _, height, width = key.shape
        values = keys if value is None else _flatten_map("value", value, batch, (height, width))
        if key_mask is not None:
            if not isinstance(key_mask, Tensor) or key_mask.dtype != torch.bool:
                raise ValueError("key_mask must be a bool tensor [batch, height, width] "
                                 "(True = real location)")
            if tuple(key_mask.shape) == (batch, height, width):
                key_mask = key_mask.flatten(1)
            elif tuple(key_mask.shape) != (batch, height * width):
                raise ValueError(f"key_mask must have shape [{batch}, {height}, {width}] or "
                                 f"[{batch}, {height * width}], got {tuple(key_mask.shape)}")
        return SpatialMemory(self.score.project_keys(keys), values, key_mask, keys,
                             height, width)

    def attend(self, query: Tensor, memory: SpatialMemory, *,
               query_lengths: Tensor | None = None, attn_mask: Tensor | None = None,
               causal: bool = False, need_weights: bool = False) -> AttentionOutput:
        """Attend from ``query [batch, Tq, query_dim]`` or ``[batch, query_dim]``."""
        if causal:
            raise ValueError("causal=True has no meaning for spatial attention")
        squeeze = isinstance(query, Tensor) and query.dim() == 2
        if squeeze:
            query = query.unsqueeze(1)
        batch, hw = memory.values.shape[0], memory.values.shape[1]
        if (not isinstance(query, Tensor) or query.dim() != 3 or query.shape[0] != batch
                or query.shape[-1] != self.query_dim or not query.dtype.is_floating_point):
            got = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
            raise ValueError(f"query must be a floating tensor [{batch}, Tq, {self.query_dim}] "
                             f"or [{batch}, {self.query_dim}], got {got}")
        tq = query.shape[1]
        if attn_mask is not None and attn_mask.dim() >= 3 \
                and tuple(attn_mask.shape[-2:]) == (memory.height, memory.width):
            attn_mask = attn_mask.flatten(-2)
        mask = build_mask(batch, tq, hw, key_mask=memory.key_mask, attn_mask=attn_mask,
                          device=query.device)
        weights = self.score.distribution(query, memory, mask)
        context, weights = self.score.read(weights, memory, query_lengths, True)
        if self.gate is not None:
            context = context * torch.sigmoid(self.gate(query)).to(context.dtype)
        weights = weights.view(batch, tq, memory.height, memory.width)
        if squeeze:
            context, weights = context.squeeze(1), weights.squeeze(1)
        return AttentionOutput(context, weights if need_weights else None)
