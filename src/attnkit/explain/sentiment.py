"""Per-token explanations of a sentiment model's verdict, by method: its attention
(`attribute`), attention rollout through every layer (`rollout`), and gradient x input and
integrated gradients of the logit by the token vectors (`attnkit.explain.captum`). Attention
and rollout are shares (sum 1 over the real tokens); gradients are signed (> 0 pushes towards
"positive"). How each is derived: docs/concepts.md, "Sentiment"."""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.attention.rollout import attention_rollout
from attnkit.explain.captum import grad_x_input, integrated_gradients
from attnkit.models.sentiment import SentimentClassifier

METHODS = ("attention", "rollout", "grad-input", "integrated-gradients")
SIGNED = ("grad-input", "integrated-gradients")
# Integrated gradients' path points (Gauss-Legendre): the completeness error stays within a
# few hundredths of a logit (tests/apps/sentiment/test_explain.py).
IG_STEPS = 32
# Tokens one forward pass of a gradient method holds (rows x time): the `best` preset reads
# 800 tokens, and its self-attention's memory grows with time squared.
IG_TOKENS = 32768


def _shares(scores: Tensor, mask: Tensor) -> Tensor:
    """``scores`` as a distribution over the real tokens (0 on padding)."""
    scores = scores * mask
    return scores / scores.sum(-1, keepdim=True).clamp_min(1e-12)


@torch.no_grad()
def attribute(model: SentimentClassifier, ids: Tensor, lengths: Tensor
              ) -> tuple[Tensor, Tensor, Tensor]:
    """P(positive) ``[batch]``, attention scores ``[batch, time]`` (a distribution over the real
    tokens) and signed contributions ``[batch, time]`` (with masking they sum to ``logit -
    classifier bias``). In the unmasked 2018 mode the pooling winners are taken among the real
    tokens only: the question is which *words* mattered."""
    x, mask, attn = model.encode(ids, lengths, need_weights=True)
    pooled, aux = model.pool(x, mask)
    prob = torch.sigmoid(model.classifier(pooled).squeeze(-1))
    w = model.classifier.weight[0]
    if model.pool_score is not None:
        scores, signed = aux * mask, aux * (x @ w) * mask
    else:
        filled = x.masked_fill(~mask.unsqueeze(-1), torch.finfo(x.dtype).min)
        top, winners = filled.max(dim=1)  # [batch, width]: value, winning position per feature
        # Each feature's term of the logit, w_d * max_t h[t, d].
        term = w * top * mask.any(-1, keepdim=True)
        rows = _trace_back(model, attn[-1], winners)  # [batch, width, time]
        scores = torch.einsum("bd,bdt->bt", term.abs(), rows) * mask
        signed = torch.einsum("bd,bdt->bt", term, rows) * mask
    return prob, _shares(scores, mask), signed


def _trace_back(model: SentimentClassifier, weights: Tensor, winners: Tensor) -> Tensor:
    """``weights [batch, heads, T, T]``, ``winners [batch, width]`` -> ``[batch, width, T]``: for
    feature ``d`` won at query ``q_d``, the attention row that made it (head ``d // head_dim``
    without an output projection, else the heads' mean; residual blocks keep half the credit on
    the winner itself)."""
    batch, width = winners.shape
    b_idx = torch.arange(batch, device=winners.device)[:, None]
    cfg = model.config
    if cfg.block == "plain" and not cfg.attn_out_proj:
        h_idx = torch.arange(width, device=winners.device)[None, :] // cfg.head_dim
        rows = weights[b_idx, h_idx, winners]  # [batch, width, T]
    else:
        rows = weights.mean(1)[b_idx, winners]
    if cfg.block == "transformer":
        own = torch.nn.functional.one_hot(winners, weights.shape[-1]).to(rows.dtype)
        rows = 0.5 * rows + 0.5 * own
    return rows


@torch.no_grad()
def rollout(model: SentimentClassifier, ids: Tensor, lengths: Tensor) -> Tensor:
    """Attention rollout (`attnkit.attention.rollout`) of the stacked layers, read by the pooling:
    ``[batch, time]`` shares over the real tokens."""
    x, mask, attn = model.encode(ids, lengths, need_weights=True)
    pooled, aux = model.pool(x, mask)
    if model.pool_score is not None:
        share = aux * mask
    else:
        term = (model.classifier.weight[0] * pooled).abs()              # [batch, width]
        share = torch.zeros_like(mask, dtype=x.dtype).scatter_add_(1, aux, term) * mask
    residual = 0.5 if model.config.block == "transformer" else 0.0
    return _shares(torch.einsum("bq,bqt->bt", share, attention_rollout(attn, residual=residual)),
                   mask)


def token_scores(model: SentimentClassifier, ids: Tensor, lengths: Tensor, method: str, *,
                 steps: int = IG_STEPS) -> Tensor:
    """``[batch, time]`` scores of each token by ``method`` (0 on padding); ValueError for an
    unknown method, UsageError when Captum is missing for a gradient one."""
    if method == "attention":
        return attribute(model, ids, lengths)[1]
    if method == "rollout":
        return rollout(model, ids, lengths)
    if method not in SIGNED:
        raise ValueError(f"unknown explanation method {method!r}")
    mask = model.real_mask(lengths, ids.shape[1])
    with torch.no_grad():
        vectors = model.token_vectors(ids, lengths)

    def forward(v: Tensor, i: Tensor, n: Tensor) -> Tensor:
        return model.logits_from_vectors(v, i, n)[:, None]

    rows = max(1, IG_TOKENS // max(ids.shape[1], 1))       # path points x reviews per pass
    if method == "grad-input":
        attr = grad_x_input(forward, vectors, target=0, args=(ids, lengths), max_rows=rows)
        return attr.sum(-1) * mask
    step = min(ids.shape[0], rows)
    parts = []
    for start in range(0, ids.shape[0], step):
        part = slice(start, start + step)
        attr, _ = integrated_gradients(
            forward, vectors[part], target=0, args=(ids[part], lengths[part]), steps=steps,
            internal_batch_size=max(rows // step, 1) * step)
        parts.append(attr.sum(-1))
    return torch.cat(parts) * mask
