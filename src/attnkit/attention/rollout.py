"""Attention rollout (Abnar & Zuidema 2020): what the attention of stacked layers says about the
inputs, not only about the layer below.

Each layer's attention, averaged over heads, is mixed with the identity for the residual
connection (``0.5 * A + 0.5 * I``, rows renormalised) and the layers are multiplied from the
top down: row ``i`` of the result is how much input position ``j`` flows into position ``i`` of
the last layer, if attention were all that moved information.

Example:
    ```python
    rolled = attention_rollout([w1, w2])          # each [batch, heads, T, T] -> [batch, T, T]
    cross = rollout_cross(cross_layers, encoder_layers)   # [batch, T_tgt, T_src]
    ```
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def _mixed(weights: Tensor, residual: float) -> Tensor:
    """``[batch, heads, T, T]`` -> ``[batch, T, T]``: heads averaged, identity mixed in."""
    a = weights.float().mean(1)
    if residual:
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        a = (1 - residual) * a + residual * eye
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-12)
    return a


def attention_rollout(layers: Sequence[Tensor], *, residual: float = 0.5) -> Tensor:
    """Roll self-attention out over stacked layers.

    Args:
        layers: each layer's attention ``[batch, heads, T, T]``, first layer first.
        residual: the identity's share for the residual connection (0: attention alone,
            for layers without one).

    Returns:
        ``[batch, T, T]``: ``R = A_L' ... A_1'`` with ``A' = (1 - r) mean_h(A) + r I``.

    Raises:
        ValueError: no layer.
    """
    if not layers:
        raise ValueError("attention_rollout needs at least one layer")
    rolled = _mixed(layers[0], residual)
    for weights in layers[1:]:
        rolled = _mixed(weights, residual) @ rolled
    return rolled


def rollout_cross(cross: Sequence[Tensor], encoder: Sequence[Tensor], *,
                  residual: float = 0.5) -> Tensor:
    """Cross-attention rolled out to the source tokens: the decoder layers' cross-attention
    (heads and layers averaged) times the encoder's self-attention rollout.

    Args:
        cross: each decoder layer's cross-attention ``[batch, heads, T_tgt, S]``.
        encoder: each encoder layer's self-attention ``[batch, heads, S, S]``.
        residual: as `attention_rollout`.

    Returns:
        ``[batch, T_tgt, S]``, rows summing to 1.
    """
    mean_cross = torch.stack([w.float().mean(1) for w in cross]).mean(0)
    return mean_cross @ attention_rollout(encoder, residual=residual)
