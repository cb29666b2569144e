"""Attention mechanisms behind one interface (see `attnkit.attention.base`)."""

from attnkit.attention.additive import AdditiveAttention, ConcatAttention
from attnkit.attention.base import (
    AttentionMemory,
    AttentionOutput,
    ScoreAttention,
    TwoStepAttention,
    build_mask,
    check_inputs,
)
from attnkit.attention.dot_product import DotProductAttention, fused_attention
from attnkit.attention.factory import create
from attnkit.attention.general import GeneralAttention
from attnkit.attention.hard import HardAttention, HardAttentionOutput
from attnkit.attention.local import LocalAttention
from attnkit.attention.masking import causal_mask, lengths_to_mask, masked_softmax
from attnkit.attention.multi_head import MultiHeadAttention
from attnkit.attention.pooling import max_pool_projected, self_attention_max_pool
from attnkit.attention.spatial import SpatialAttention, SpatialMemory

__all__ = [
    "AdditiveAttention", "ConcatAttention", "GeneralAttention", "HardAttention",
    "HardAttentionOutput", "LocalAttention", "SpatialAttention", "SpatialMemory", "create",
    "AttentionMemory", "AttentionOutput", "DotProductAttention", "MultiHeadAttention",
    "ScoreAttention", "TwoStepAttention", "build_mask", "causal_mask", "check_inputs",
    "fused_attention", "lengths_to_mask", "masked_softmax", "max_pool_projected",
    "self_attention_max_pool",
]
