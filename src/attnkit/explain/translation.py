"""Gradient attributions of a translation: how much each source piece's embedding decided each
target piece, by gradient x input or integrated gradients (`attnkit.explain.captum`).

Target piece ``r`` is explained by its log-probability with the target before it fed, one
batch row per piece, so one backward pass (or ``steps``) explains the sentence. A piece's
attribution sums its embedding's dimensions; the matrix shown is its absolute value,
normalised per target piece like attention."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from attnkit.decoding.forced import teacher_forced_logprobs
from attnkit.explain.captum import grad_x_input, integrated_gradients

# Integrated gradients: points on the path from the zero baseline (Gauss-Legendre). Each point
# costs a forward and backward pass per target piece, so a 40-piece sentence is 16 x 40 rows;
# tests/apps/translate/test_align.py checks completeness on a small model.
IG_STEPS = 16
# Tokens one forward and backward pass holds (rows x (source + target pieces)): each row is
# the whole pair, so a pass over every row at once grew with the square of its length (a
# 200-token pair took 7.5 GB). The memory bound of a gradient method (docs/guide/translate.md).
ATTRIBUTION_TOKENS = 8192


def _logprob_forward(model: nn.Module):
    def forward(embedded: Tensor, src: Tensor, lengths: Tensor, tgt_in: Tensor,
                gold: Tensor) -> Tensor:
        state = model.encode(src, lengths, beams=1, use_cache=False, weights="none",
                             embedded=embedded)
        logp = teacher_forced_logprobs(model, state, tgt_in)
        return logp.gather(-1, gold.unsqueeze(-1))[..., 0]        # [batch, T]
    return forward


def attribution_rows(model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int],
                     method: str, *, steps: int = IG_STEPS, signed: bool = False) -> Tensor:
    """``[n, S]``: each target piece's attribution over the source pieces, by ``method``
    (``"grad-input"`` or ``"integrated-gradients"``); ``tgt_ids`` without ``<bos>``/``<eos>``;
    ``signed``: the raw sums instead of the normalised magnitudes. UsageError: no Captum."""
    c = model.config
    device = next(model.parameters()).device
    n = len(tgt_ids)
    if n == 0:
        return torch.zeros(0, len(src_ids))
    src = torch.tensor([list(src_ids)], device=device).expand(n, -1)
    lengths = torch.full((n,), len(src_ids), device=device)
    tgt_in = torch.tensor([[c.bos_id, *tgt_ids[:-1]]], device=device).expand(n, -1)
    gold = torch.tensor([list(tgt_ids)], device=device).expand(n, -1)
    embedded = model.source_embedding(src).detach()                   # [n, S, e]
    forward = _logprob_forward(model)
    args, target = (src, lengths, tgt_in, gold), list(range(n))
    rows = max(1, ATTRIBUTION_TOKENS // (len(src_ids) + n))
    if method == "grad-input":
        attr = grad_x_input(forward, embedded, target=target, args=args, max_rows=rows)
    else:
        attr, _ = integrated_gradients(forward, embedded, target=target, args=args,
                                       steps=steps, internal_batch_size=rows)
    summed = attr.sum(-1).float().cpu()                                # [n, S]
    if signed:
        return summed
    mag = summed.abs()
    return mag / mag.sum(-1, keepdim=True).clamp_min(1e-12)
