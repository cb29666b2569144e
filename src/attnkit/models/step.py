"""The step API: what every decodable model gives `attnkit.decoding` (greedy, beam, forced).

``encode(src, src_lengths, *, beams, use_cache, weights)`` -> a state of ``beams`` rows per
sentence (sentence-major); ``step(tokens [rows, t], state, *, weights, logits)`` ->
`StepOutput`; ``reorder(state, rows, sentences)`` -> the state of the rows that go on.
Decoders pass every option, every time. The contract in full: docs/concepts.md ("The step API").

Example:
    ```python
    state = model.encode(src, src_lengths, beams=1, use_cache=True, weights="none")
    out = model.step(prev.unsqueeze(1), state, weights="last", logits=True)
    state = model.reorder(out.state, rows=keep, sentences=keep)
    ```
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol

from torch import Tensor

Weights = Literal["none", "last", "all"]
WEIGHTS: tuple[str, ...] = ("none", "last", "all")


def check_weights(weights: str) -> None:
    """Refuse anything but a `Weights` value (one line naming the choices)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")


class StepOutput(NamedTuple):
    """What ``step`` returns.

    Attributes:
        logits: ``[rows, t, V]`` unnormalised, in the model's dtype (None with ``logits=False``).
        state: the state after the step (possibly the one given, updated in place).
        weights: the attention over the source, None for ``"none"``.
        hidden: per decoder layer, its output ``[rows, t, d]`` (None for an RNN).
    """

    logits: Tensor | None
    state: Any
    weights: Tensor | None
    hidden: list[Tensor] | None


class DecoderState(Protocol):
    """What decoders read of a state: ``source [sentences, S, d]`` and ``encoder_weights``
    (``[sentences, layers, heads, S, S]`` with ``weights="all"``, else None).
    """

    source: Tensor
    encoder_weights: Tensor | None


class StepModel(Protocol):
    """A model `attnkit.decoding` can decode (module docstring); an ``nn.Module`` (decoders
    switch it to eval mode while they decode)."""

    config: Any
    training: bool

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...

    def parameters(self) -> Any: ...

    def encode(self, src: Tensor, src_lengths: Tensor, *, beams: int, use_cache: bool,
               weights: Weights) -> DecoderState: ...

    def step(self, tokens: Tensor, state: Any, *, weights: Weights,
             logits: bool) -> StepOutput: ...

    def reorder(self, state: Any, rows: Tensor, sentences: Tensor | None) -> DecoderState: ...
