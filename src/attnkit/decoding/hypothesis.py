"""What the decoders share: the output record, per-sentence length limits, eval mode."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass
class Hypothesis:
    """One decoded sentence.

    Attributes:
        tokens: output token ids, without BOS and without the final EOS.
        attention: ``[len(tokens), src_len]`` weights over the *real* source tokens (no padding
            columns), the row of each output token; None for models without attention.
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
