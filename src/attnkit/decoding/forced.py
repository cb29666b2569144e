"""Forced decoding: a given target fed to a translation model (teacher forcing), with the
attention of every step, the decoder's states and the log-probability of every given token.

This is what word alignment reads: not the model's own translation, but the target it is given.
Row ``r`` of the result reads ``tgt_in[r]`` (``<bos>``, then the target tokens) and predicts
``tgt_out[r]`` (the target tokens, then ``<eos>``): a target of ``n`` tokens has ``n + 1`` rows.

Example:
    ```python
    out = forced_decode(model, [[5, 6, 7]], [[8, 9]])[0]
    out.attention.shape      # [layers, heads, 3, 3]: rows <bos> y1 y2, columns the source
    out.logprobs             # [3]: log p(y1), log p(y2), log p(<eos>)
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.data.batching import pad_ids
from attnkit.decoding.hypothesis import inference
from attnkit.models.step import StepModel


@dataclass
class Forced:
    """The forced decoding of one pair (``T = n + 1`` rows for a target of ``n`` tokens).

    Attributes:
        attention: ``[layers, heads, T, S]`` cross-attention (an RNN: ``[1, 1, T, S]``).
        logprobs: ``[T]`` log-probability of each given token and of ``<eos>`` (None when
            not asked).
        states: per decoder layer ``[T, d]`` (a Transformer's; None for an RNN).
        memory: ``[S, d]`` encoder output (with ``keep_states``; else None).
        encoder: ``[layers, heads, S, S]`` the encoder's self-attention (a Transformer's;
            None for an RNN): attention rollout reads it.
    """

    attention: Tensor
    logprobs: Tensor | None
    states: list[Tensor] | None = None
    memory: Tensor | None = None
    encoder: Tensor | None = None


def teacher_forced_logprobs(model: StepModel, state, tgt_in: Tensor) -> Tensor:
    """``[batch, T, V]`` log-probabilities of teacher-forced decoding from an encoded
    ``state`` (the step API with the whole target at once); differentiable when the state was
    encoded with ``use_cache=False``."""
    logits = model.step(tgt_in, state, weights="none", logits=True).logits
    return torch.log_softmax(logits.float(), dim=-1)


def forced_decode(model: StepModel, src_ids: Sequence[Sequence[int]],
                  tgt_ids: Sequence[Sequence[int]], *, batch_size: int = 32,
                  keep_states: bool = False, logprobs: bool = True) -> list[Forced]:
    """Feed each target to the model and keep what alignment needs.

    Through the step API: ``encode`` (keeping a Transformer encoder's self-attention), then
    one ``step`` with the whole target, every layer's and head's cross-attention asked.

    Args:
        model: a translation model (``config`` with ``pad_id``, ``bos_id``, ``eos_id``).
        src_ids: the source ids of each pair (at least one each).
        tgt_ids: the target ids of each pair, without ``<bos>`` / ``<eos>``.
        batch_size: pairs per forward pass (sorted by length, so padding stays small).
        keep_states: also keep the decoder layers' states (a Transformer's) and the encoder
            output.
        logprobs: compute the log-probabilities (False skips the output layer).

    Returns:
        One `Forced` per pair, in order (float32, on the CPU).

    Raises:
        ValueError: the lists differ in length, a source is empty, or the model has no
            attention.
    """
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"{len(src_ids)} sources but {len(tgt_ids)} targets")
    c = model.config
    order = sorted(range(len(src_ids)), key=lambda k: (len(src_ids[k]), len(tgt_ids[k])))
    out: list[Forced | None] = [None] * len(src_ids)
    device = next(model.parameters()).device
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        if any(not src_ids[k] for k in rows):
            raise ValueError("an empty source has nothing to attend to")
        src = pad_ids([src_ids[k] for k in rows], c.pad_id).to(device)
        lengths = torch.tensor([len(src_ids[k]) for k in rows], device=device)
        tgt_in = pad_ids([[c.bos_id, *tgt_ids[k]] for k in rows], c.pad_id).to(device)
        gold = pad_ids([[*tgt_ids[k], c.eos_id] for k in rows], c.pad_id).to(device)
        with inference(model):
            state = model.encode(src, lengths, beams=1, use_cache=True, weights="all")
            fed = model.step(tgt_in, state, weights="all", logits=logprobs)
        if fed.weights is None:
            raise ValueError("this model has no attention (attention='none')")
        weights = fed.weights.permute(0, 2, 3, 1, 4)                     # [B, L, H, T, S]
        states, memory, encoder = fed.hidden, fed.state.source, fed.state.encoder_weights
        logp = None if fed.logits is None else torch.log_softmax(fed.logits.float(), -1).gather(
            -1, gold.unsqueeze(-1))[..., 0]
        for b, k in enumerate(rows):
            s, t = len(src_ids[k]), len(tgt_ids[k]) + 1
            out[k] = Forced(
                weights[b, :, :, :t, :s].float().cpu(), None if logp is None else logp[b, :t].cpu(),
                [h[b, :t].float().cpu() for h in states] if keep_states and states else None,
                memory[b, :s].float().cpu() if keep_states and memory is not None else None,
                None if encoder is None else encoder[b, :, :, :s, :s].float().cpu())
    return out  # type: ignore[return-value]
