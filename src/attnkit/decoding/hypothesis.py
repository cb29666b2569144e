"""What the decoders share: the output record, per-sentence length limits, inference mode, the
translation of a caller's ``need_weights`` into the step API's `attnkit.models.step.Weights`,
and unknown-word replacement from a hypothesis's attention (`replace_unk`).

Every decoder talks to its model through the step API only (`attnkit.models.step.StepModel`:
``encode``, ``step``, ``reorder``), passing every option every time.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.models.step import StepModel, Weights


@dataclass
class Hypothesis:
    """One decoded sentence.

    Attributes:
        tokens: output token ids, without BOS and the final EOS.
        attention: ``[len(tokens), src_len]`` over the real source tokens (``"all"``:
            ``[len(tokens), layers, heads, src_len]``), or None.
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
    cap = math.inf if max_len is None else max_len
    return [max(1, min(math.ceil(max_len_ratio * n) + max_len_offset, cap))
            for n in src_lengths.tolist()]


@contextlib.contextmanager
def inference(model: StepModel) -> Iterator[None]:
    """Eval mode under ``torch.inference_mode``, the model's mode restored afterwards (a model
    already in eval mode is left alone: switching walks every submodule twice).
    """
    was_training = model.training
    if was_training:
        model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        if was_training:
            model.train()


def weights_wanted(need_weights: bool | str) -> Weights:
    """A decoder's ``need_weights`` (False, True or ``"all"``) as the step API's `Weights`:
    ``"none"``, ``"last"`` (one row per token) or ``"all"`` (every layer and head)."""
    if need_weights == "all":
        return "all"
    if isinstance(need_weights, bool):
        return "last" if need_weights else "none"
    raise ValueError(f"need_weights must be True, False or 'all', got {need_weights!r}")


def replace_unk(output_tokens: Sequence[str], attention: Tensor | None,
                source_tokens: Sequence[str], unk: str = "<unk>") -> list[str]:
    """Each ``unk`` in ``output_tokens`` replaced by the source word of highest attention (Luong
    et al. 2015: names and numbers are usually copied verbatim).

    ``attention [T_out, S]`` over the ``source_tokens`` (None leaves the tokens as they are);
    positions past the words (an EOS) are never copied. Returns a new list.
    """
    out = list(output_tokens)
    if attention is None or unk not in out:
        return out
    if attention.dim() != 2 or attention.shape[0] < len(out):
        raise ValueError(f"attention must have shape [{len(out)}, S], "
                         f"got {tuple(attention.shape)}")
    n_src = min(attention.shape[1], len(source_tokens))
    if n_src == 0:
        return out
    best = attention[:, :n_src].argmax(dim=-1).tolist()
    return [source_tokens[best[i]] if word == unk else word for i, word in enumerate(out)]
