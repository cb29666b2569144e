"""Attention rollout (Abnar & Zuidema 2020): how much each input position flows into each
position of the last layer, if attention were all that moved information.

Each layer's head-mean attention is mixed with the identity for the residual connection and
the layers are multiplied from the top down.
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
    """``layers`` (``[batch, heads, T, T]`` each, first first) -> ``R = A_L' ... A_1'`` ``[batch, T,
    T]``, ``A' = (1 - r) mean_h(A) + r I`` with ``r`` = ``residual``.
    """
    if not layers:
        raise ValueError("attention_rollout needs at least one layer")
    rolled = _mixed(layers[0], residual)
    for weights in layers[1:]:
        rolled = _mixed(weights, residual) @ rolled
    return rolled


def rollout_cross(cross: Sequence[Tensor], encoder: Sequence[Tensor], *,
                  residual: float = 0.5) -> Tensor:
    """The decoder layers' mean cross-attention (``[batch, heads, T_tgt, S]`` each) times the
    encoder's rollout (``[batch, heads, S, S]`` each): ``[batch, T_tgt, S]``, rows summing to 1.
    """
    mean_cross = torch.stack([w.float().mean(1) for w in cross]).mean(0)
    return mean_cross @ attention_rollout(encoder, residual=residual)
