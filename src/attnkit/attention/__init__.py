"""Attention mechanisms behind one interface (see :mod:`attnkit.attention.base`)."""

from attnkit.attention.base import (
    AttentionMemory,
    AttentionOutput,
    ScoreAttention,
    build_mask,
    check_inputs,
)
from attnkit.attention.masking import causal_mask, lengths_to_mask, masked_softmax

__all__ = [
    "AttentionMemory",
    "AttentionOutput",
    "ScoreAttention",
    "build_mask",
    "causal_mask",
    "check_inputs",
    "lengths_to_mask",
    "masked_softmax",
]
