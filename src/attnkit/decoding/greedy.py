"""Greedy decoding of a padded batch of source sentences.

Works with any model of the step API (``encode``/``decode_step``/``reorder_state``, see
:mod:`attnkit.models.seq2seq`). Runs in eval mode under ``no_grad``. A sentence leaves the batch
as soon as it is finished (EOS or its length limit), so the remaining steps run on the
sentences still being decoded only.

Example::

    hyps = greedy_decode(model, batch["src"], batch["src_lengths"])
    hyps[0].tokens, hyps[0].attention      # ids, [len(tokens), src_len]
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths, start, step


def greedy_decode(model: nn.Module, src: Tensor, src_lengths: Tensor, *,
                  max_len_ratio: float = 2.0, max_len_offset: int = 5,
                  max_len: int | None = 200, need_weights: bool | str = True,
                  use_cache: bool = True) -> list[Hypothesis]:
    """Pick the most probable token at every step, for every sentence of the batch at once.

    Args:
        model: a translation model with the step API; its ``config`` gives bos/eos/pad ids.
        src: ``[batch, S]`` source ids (padded).
        src_lengths: ``[batch]`` real source lengths.
        max_len_ratio, max_len_offset, max_len: a sentence stops after
            ``min(ceil(ratio * src_len) + offset, max_len)`` tokens (EOS included).
        need_weights: keep the attention rows (``Hypothesis.attention``; None otherwise, which
            lets a Transformer run its fused attention kernels); ``"all"``: a Transformer's
            rows of every layer and head (``[len(tokens), layers, heads, src_len]``).
        use_cache: incremental decoding (False: the model's uncached reference path).

    Returns:
        One :class:`Hypothesis` per sentence, in batch order.
    """
    cfg = model.config
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    batch = src.shape[0]
    tokens: list[list[int]] = [[] for _ in range(batch)]
    total, ended = [0.0] * batch, [False] * batch
    attn_steps: list[Tensor] = []  # per step [batch, ..., S], zeros for finished sentences
    with inference(model):
        state = start(model, src, src_lengths, use_cache)
        alive = torch.arange(batch, device=src.device)
        prev = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=src.device)
        for t in range(max(limits)):
            log_probs, state, w = step(model, prev, state, need_weights)
            best, nxt = log_probs.max(dim=-1)
            if w is not None:
                attn_steps.append(w.new_zeros(batch, *w.shape[1:]).index_copy(0, alive, w))
            keep = []
            for i, (b, tok, s) in enumerate(zip(alive.tolist(), nxt.tolist(), best.tolist(),
                                                strict=True)):
                total[b] += s
                if tok == cfg.eos_id:
                    ended[b] = True
                    continue
                tokens[b].append(tok)
                if t + 1 < limits[b]:
                    keep.append(i)
            if not keep:
                break
            if len(keep) < len(alive):  # drop the finished sentences from the batch
                index = torch.tensor(keep, device=src.device)
                state = model.reorder_state(state, index)
                alive, nxt = alive.index_select(0, index), nxt.index_select(0, index)
            prev = nxt
    attn = torch.stack(attn_steps, 1) if attn_steps else None  # [batch, T, ..., S]
    lengths = src_lengths.tolist()
    out = []
    for b in range(batch):
        a = None if attn is None else attn[b, : len(tokens[b]), ..., : lengths[b]].float().cpu()
        out.append(Hypothesis(tokens[b], a, total[b], ended[b]))
    return out
