"""Forced decoding: a given target fed to a translation model, with every step's attention and
the log-probability of every given token (what word alignment reads).

Row ``r`` reads ``tgt_in[r]`` (``<bos>``, then the target) and predicts ``tgt_out[r]`` (the
target, then ``<eos>``): a target of ``n`` tokens has ``n + 1`` rows.

Example:
    ```python
    out = forced_decode(model, [[5, 6, 7]], [[8, 9]])[0]
    out.attention.shape      # [layers, heads, 3, 3]: rows <bos> y1 y2, columns the source
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.data.batching import pad_ids
from attnkit.decoding.batched import padded_sources
from attnkit.decoding.hypothesis import inference
from attnkit.models.step import StepModel


@dataclass
class Forced:
    """The forced decoding of one pair (``T = n + 1`` rows for a target of ``n`` tokens).

    Attributes:
        attention: ``[layers, heads, T, S]`` cross-attention (an RNN: ``[1, 1, T, S]``).
        logprobs: ``[T]`` log-probability of each given token and of ``<eos>``, or None.
        encoder: ``[layers, heads, S, S]`` a Transformer encoder's self-attention, else None.
    """

    attention: Tensor
    logprobs: Tensor | None
    encoder: Tensor | None = None


def teacher_forced_logprobs(model: StepModel, state, tgt_in: Tensor) -> Tensor:
    """``[batch, T, V]`` log-probabilities of teacher-forced decoding from an encoded
    ``state`` (the step API with the whole target at once); differentiable when the state was
    encoded with ``use_cache=False``."""
    logits = model.step(tgt_in, state, weights="none", logits=True).logits
    return torch.log_softmax(logits.float(), dim=-1)


def forced_decode(model: StepModel, src_ids: Sequence[Sequence[int]],
                  tgt_ids: Sequence[Sequence[int]], *, batch_size: int = 32,
                  logprobs: bool = True) -> list[Forced]:
    """Feed each target (ids without ``<bos>``/``<eos>``) to the model: one `Forced` per pair, in
    order (float32, on the CPU).

    ``batch_size`` pairs per pass (sorted by length); ``logprobs=False`` skips the output
    layer.

    Raises:
        ValueError: the lists differ in length, a source is empty, or the model has no attention.
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
        src, lengths = padded_sources([src_ids[k] for k in rows], c.pad_id, device)
        tgt_in = pad_ids([[c.bos_id, *tgt_ids[k]] for k in rows], c.pad_id).to(device)
        gold = pad_ids([[*tgt_ids[k], c.eos_id] for k in rows], c.pad_id).to(device)
        with inference(model):
            state = model.encode(src, lengths, beams=1, use_cache=True, weights="all")
            fed = model.step(tgt_in, state, weights="all", logits=logprobs)
        if fed.weights is None:
            raise ValueError("this model has no attention (attention='none')")
        weights = fed.weights.permute(0, 2, 3, 1, 4)                     # [B, L, H, T, S]
        encoder = fed.state.encoder_weights
        logp = None if fed.logits is None else torch.log_softmax(fed.logits.float(), -1).gather(
            -1, gold.unsqueeze(-1))[..., 0]
        for b, k in enumerate(rows):
            s, t = len(src_ids[k]), len(tgt_ids[k]) + 1
            out[k] = Forced(
                weights[b, :, :, :t, :s].float().cpu(), None if logp is None else logp[b, :t].cpu(),
                None if encoder is None else encoder[b, :, :, :s, :s].float().cpu())
    return out  # type: ignore[return-value]
