"""The step API: what every decodable model gives `attnkit.decoding` (greedy, beam, forced).

A model of the step API (`RNNSeq2Seq`, `TransformerSeq2Seq`, `Captioner`, or yours) has:

* ``encode(src [sentences, S], src_lengths [sentences], *, beams, use_cache, weights)`` -> a
  decoding state holding ``beams`` rows per sentence (sentence-major: rows ``b * beams ..
  b * beams + beams - 1`` are the hypotheses of sentence ``b``). What does not depend on the
  hypothesis (the encoder output, the attention keys over it, the padding mask) is kept once per
  sentence, never copied per beam.
* ``step(tokens [rows, t], state, *, weights, logits)`` -> `StepOutput`: feed ``t`` new
  tokens to every row (decoding: ``t = 1``; forced decoding: the whole target at once) and get
  the scores of the next token after each, unnormalised (each decoder normalises what it needs;
  forced decoding without log-probabilities skips the output layer).
* ``reorder(state, rows, sentences)`` -> the state of rows ``rows`` (beam search: the parents of
  the hypotheses that go on; greedy: the sentences not finished); ``sentences`` (None: the same
  sentences) are the sentences still decoded, in order, when some have finished.

Decoders pass every option, every time: there are no defaults to differ from and nothing to
probe with ``hasattr``. A model without a choice (an RNN has one attention) treats ``"all"`` as
its one attention, ``[rows, t, 1, 1, S]``, and ``use_cache`` as it can.

``weights`` (`Weights`) asks for the attention over the source: ``"none"`` (the model may take
a faster path, e.g. fused attention kernels), ``"last"`` (``[rows, t, S]``: a Transformer's
last decoder layer averaged over heads) or ``"all"`` (``[rows, t, layers, heads, S]``). ``encode``
with ``weights="all"`` also keeps a Transformer encoder's self-attention (attention rollout).

Example:
    ```python
    state = model.encode(src, src_lengths, beams=1, use_cache=True, weights="none")
    out = model.step(prev.unsqueeze(1), state, weights="last", logits=True)
    torch.log_softmax(out.logits[:, -1].float(), dim=-1)      # [rows, V]
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
        logits: ``[rows, t, V]`` unnormalised next-token scores, in the model's dtype (None
            when ``logits=False`` was asked: forced decoding that needs only the attention).
        state: the state after the step (it may be the one given, updated in place).
        weights: the attention over the source (module docstring), None for ``"none"``.
        hidden: per decoder layer, its output ``[rows, t, d]`` (a Transformer's; None for
            models without such layers).
    """

    logits: Tensor | None
    state: Any
    weights: Tensor | None
    hidden: list[Tensor] | None


class DecoderState(Protocol):
    """What decoders read of a state beyond handing it back to the model.

    Attributes:
        source: the encoder output ``[sentences, S, d]``.
        encoder_weights: ``[sentences, layers, heads, S, S]`` self-attention of a Transformer
            encoder, kept when ``encode(..., weights="all")``; else None.
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
