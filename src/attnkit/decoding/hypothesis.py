"""What the decoders share: the output record, per-sentence length limits, eval mode, and the
two calls into a model's step API with the optional ``use_cache`` / ``need_weights`` switches.

A model of the step API may accept ``encode(..., use_cache=False)`` (an uncached reference path)
and ``decode_step(..., need_weights=False)`` (no attention wanted: a faster path) or
``need_weights="all"`` (a Transformer's cross-attention of every layer and head, for the
attention explorer page); the switches are passed only when they differ from the defaults, so
models without them (the captioner) keep working with the defaults.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class Hypothesis:
    """One decoded sentence.

    Attributes:
        tokens: output token ids, without BOS and without the final EOS.
        attention: ``[len(tokens), src_len]`` weights over the *real* source tokens (no padding
            columns), the row of each output token; ``[len(tokens), layers, heads, src_len]``
            when decoded with ``need_weights="all"`` by a Transformer; None for models without
            attention or when not asked.
        score: total log-probability (EOS included when the sentence ended with it).
        ended: True when the model emitted EOS (False: cut at the length limit).
    """

    tokens: list[int]
    attention: Tensor | None
    score: float
    ended: bool


def max_lengths(src_lengths: Tensor, max_len_ratio: float, max_len_offset: int,
                max_len: int | None) -> list[int]:
    """Per sentence, the most tokens (EOS included) to generate:
    ``ceil(ratio * src_len) + offset``, capped at ``max_len``; at least 1."""
    if max_len_ratio <= 0:
        raise ValueError(f"max_len_ratio must be > 0, got {max_len_ratio}")
    limits = []
    for n in src_lengths.tolist():
        limit = math.ceil(max_len_ratio * n) + max_len_offset
        if max_len is not None:
            limit = min(limit, max_len)
        limits.append(max(1, limit))
    return limits


@contextlib.contextmanager
def inference(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) under ``torch.no_grad``; restores the model's mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def start(model: nn.Module, src: Tensor, src_lengths: Tensor, use_cache: bool) -> Any:
    """``model.encode(src, src_lengths)``; with ``use_cache=False`` the uncached reference."""
    if use_cache:
        return model.encode(src, src_lengths)
    return model.encode(src, src_lengths, use_cache=False)


def step(model: nn.Module, prev: Tensor, state: Any,
         need_weights: bool | str) -> tuple[Tensor, Any, Tensor | None]:
    """``model.decode_step(prev, state)``: weights ``[batch, S]`` (True), the model's own
    ``"all"`` form (a Transformer: ``[batch, layers, heads, S]``), or dropped (False)."""
    if need_weights == "all":
        return model.decode_step(prev, state, need_weights="all")
    if need_weights:
        return model.decode_step(prev, state)
    log_probs, state, _ = model.decode_step(prev, state, need_weights=False)
    return log_probs, state, None
