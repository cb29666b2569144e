"""The step API: what every decodable model gives `attnkit.decoding` (greedy, beam, forced).

``encode(src, src_lengths, *, beams, use_cache, weights)`` -> a state of ``beams`` rows per
sentence (sentence-major); ``step(tokens [rows, t], state, *, weights, logits)`` ->
`StepOutput`; ``reorder(state, rows, sentences)`` -> the state of the rows that go on.
Decoders pass every option, every time. The contract in full: docs/concepts.md ("The step API").
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol

import torch
from torch import Tensor

Weights = Literal["none", "last", "all"]
WEIGHTS: tuple[str, ...] = ("none", "last", "all")


def check_weights(weights: str) -> None:
    """Refuse anything but a `Weights` value (one line naming the choices)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")


def check_tokens(src: Tensor, src_lengths: Tensor) -> None:
    """Raise ValueError unless ``src [batch, S]`` ints and ``src_lengths [batch]`` in 1..S."""
    if src.dim() != 2 or src.dtype.is_floating_point:
        raise ValueError(f"src must be integer token ids [batch, S], got {tuple(src.shape)} "
                         f"{src.dtype}")
    if src_lengths.dim() != 1 or src_lengths.shape[0] != src.shape[0]:
        raise ValueError(f"src_lengths must have shape [{src.shape[0]}], "
                         f"got {tuple(src_lengths.shape)}")
    # Not while compiling: a read of values would cut the graph (`lengths_to_mask`).
    if src_lengths.numel() and not torch.compiler.is_compiling() and (
            int(src_lengths.min()) < 1 or int(src_lengths.max()) > src.shape[1]):
        raise ValueError(f"src_lengths must lie in 1..{src.shape[1]} (the padded source length), "
                         f"got {src_lengths.tolist()}")


def check_targets(src: Tensor, tgt_in: Tensor) -> None:
    """Raise ValueError unless ``tgt_in`` is ``[batch, T]``, one target per source (what every
    encoder-decoder's teacher-forced forward takes)."""
    if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
        raise ValueError(f"tgt_in must have shape [{src.shape[0]}, T], "
                         f"got {tuple(tgt_in.shape)}")


class StepOutput(NamedTuple):
    """What ``step`` returns: ``logits [rows, t, V]`` (None with ``logits=False``), the state
    after the step (maybe the one given, updated in place), the attention over the source
    (None for ``"none"``) and per decoder layer its output ``hidden [rows, t, d]`` (None for
    an RNN)."""

    logits: Tensor | None
    state: Any
    weights: Tensor | None
    hidden: list[Tensor] | None


def stacked_steps(logits: list[Tensor], maps: list[Tensor | None], state: Any, weights: Weights,
                  keep_logits: bool) -> StepOutput:
    """The `StepOutput` of a model fed one position at a time (``logits [rows, V]`` and
    attention ``[rows, S]`` per position); its one attention is ``"all"``: ``[rows, t, 1, 1, S]``.
    """
    rows = None
    if weights != "none" and maps[0] is not None:
        rows = torch.stack(maps, dim=1)
        rows = rows[:, :, None, None] if weights == "all" else rows
    return StepOutput(torch.stack(logits, dim=1) if keep_logits else None, state, rows, None)


class StepModel(Protocol):
    """A model `attnkit.decoding` can decode (module docstring): an ``nn.Module`` with a
    ``config`` holding ``pad_id``, ``bos_id`` and ``eos_id`` (decoders switch it to eval mode
    while they decode)."""

    config: Any
    training: bool

    def encode(self, src: Tensor, src_lengths: Tensor, *, beams: int, use_cache: bool,
               weights: Weights) -> Any: ...

    def step(self, tokens: Tensor, state: Any, *, weights: Weights,
             logits: bool) -> StepOutput: ...

    def reorder(self, state: Any, rows: Tensor, sentences: Tensor | None) -> Any: ...
