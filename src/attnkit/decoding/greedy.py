"""Greedy decoding of a padded batch of source sentences.

Works with any model of the step API (``encode``/``decode_step``/``reorder_state``, see
:mod:`attnkit.models.seq2seq`). Runs in eval mode under ``no_grad``.

Example::

    hyps = greedy_decode(model, batch["src"], batch["src_lengths"])
    hyps[0].tokens, hyps[0].attention      # ids, [len(tokens), src_len]
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths


def greedy_decode(model: nn.Module, src: Tensor, src_lengths: Tensor, *,
                  max_len_ratio: float = 2.0, max_len_offset: int = 5,
                  max_len: int | None = 200) -> list[Hypothesis]:
    """Pick the most probable token at every step, for every sentence of the batch at once.

    Args:
        model: a translation model with the step API; its ``config`` gives bos/eos/pad ids.
        src: ``[batch, S]`` source ids (padded).
        src_lengths: ``[batch]`` real source lengths.
        max_len_ratio, max_len_offset, max_len: a sentence stops after
            ``min(ceil(ratio * src_len) + offset, max_len)`` tokens (EOS included).

    Returns:
        One :class:`Hypothesis` per sentence, in batch order.
    """
    cfg = model.config
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    batch = src.shape[0]
    with inference(model):
        state = model.encode(src, src_lengths)
        prev = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=src.device)
        limit_t = torch.tensor(limits, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        steps: list[Tensor] = []
        scores: list[Tensor] = []
        weights: list[Tensor | None] = []
        for t in range(max(limits)):
            log_probs, state, w = model.decode_step(prev, state)
            best, nxt = log_probs.max(dim=-1)
            nxt = torch.where(finished, torch.full_like(nxt, cfg.pad_id), nxt)
            steps.append(nxt)
            scores.append(torch.where(finished, torch.zeros_like(best), best))
            weights.append(w)
            finished = finished | (nxt == cfg.eos_id) | (t + 1 >= limit_t)
            if bool(finished.all()):
                break
            prev = nxt
    tokens = torch.stack(steps, 1).tolist()
    total = torch.stack(scores, 1).sum(1).tolist()
    attn = None if weights[0] is None else torch.stack(weights, 1)  # [batch, T, S]
    lengths = src_lengths.tolist()
    out: list[Hypothesis] = []
    for b in range(batch):
        seq = tokens[b][: limits[b]]
        ended = cfg.eos_id in seq
        n = seq.index(cfg.eos_id) if ended else len(seq)
        a = None if attn is None else attn[b, :n, : lengths[b]].float().cpu()
        out.append(Hypothesis(seq[:n], a, total[b], ended))
    return out
