"""Per-token explanations of a sentiment model's verdict, and how faithful each is.

By method (`token_scores`): its attention (`attribute`), attention rollout through every layer
(`rollout`), and gradient x input and integrated gradients of the logit by the token vectors
(`attnkit.explain.captum`); attention and rollout are shares (sum 1 over the real tokens),
gradients are signed (> 0 pushes towards "positive"). `faithfulness` measures each by
ERASER's comprehensiveness and sufficiency (DeYoung et al. 2020), random token orders as the
floor. How each is derived: docs/concepts.md, "Sentiment"."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnkit.attention.rollout import attention_rollout
from attnkit.data.review_pipeline import TextPipeline, pad_sequences
from attnkit.errors import UsageError
from attnkit.explain.captum import grad_x_input, integrated_gradients
from attnkit.explain.trust import RANDOM, Measured
from attnkit.models.sentiment import SentimentClassifier

METHODS = ("attention", "rollout", "grad-input", "integrated-gradients")
SIGNED = ("grad-input", "integrated-gradients")
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
                 steps: int = 32) -> Tensor:
    """``[batch, time]`` scores of each token by ``method`` (one of `METHODS`; 0 on padding;
    ``steps``: integrated gradients' path points); UsageError when Captum is missing for a
    gradient one."""
    if method == "attention":
        return attribute(model, ids, lengths)[1]
    if method == "rollout":
        return rollout(model, ids, lengths)
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


BINS = (1, 5, 10, 20, 50)
COMPREHENSIVENESS = "comprehensiveness ↑"
# Trust needs a method whose comprehensiveness leads random and every other method by MARGIN,
# measured on MIN_REVIEWS reviews or more (docs/guide/trust.md).
MARGIN = 0.02
MIN_REVIEWS = 100
# Padded tokens one forward pass holds: the `best` preset reads 800 tokens per review.
BATCH_TOKENS = 65536


def _probabilities(model: SentimentClassifier, pipeline: TextPipeline,
                   rows: Sequence[Sequence[int]]) -> np.ndarray:
    """P(positive) of id sequences (each at least one token), in batches of similar length
    cut to their longest (at most `BATCH_TOKENS` padded tokens each)."""
    device = next(model.parameters()).device
    out = np.zeros(len(rows), dtype=np.float64)
    order = sorted(range(len(rows)), key=lambda k: len(rows[k]))
    start = 0
    while start < len(order):
        longest = len(rows[order[min(start + 255, len(order) - 1)]]) \
            if model.config.mask_padding else pipeline.maxlen
        take = max(1, min(256, BATCH_TOKENS // max(longest, 1)))
        part = order[start:start + take]
        # The 2018 mode attends to padding: its inputs keep their full width.
        width = max(len(rows[k]) for k in part) if model.config.mask_padding \
            else pipeline.maxlen
        ids, lengths = pad_sequences([rows[k] for k in part], width, padding=pipeline.padding,
                                     truncating=pipeline.truncating)
        with torch.no_grad():
            probs = torch.sigmoid(model(ids.to(device), lengths.to(device)))
        out[part] = probs.float().cpu().numpy()
        start += take
    return out


def _kept(n: int, k: int) -> int:
    return min(n, max(1, math.ceil(n * k / 100)))


def faithfulness(model: SentimentClassifier, pipeline: TextPipeline, texts: Sequence[str], *,
                 methods: Sequence[str] = METHODS, seed: int = 0, batch_size: int = 32) -> dict:
    """Comprehensiveness and sufficiency (ERASER, for ``k`` in `BINS`: docs/concepts.md,
    "Sentiment") of each of ``methods`` and of random orders (``seed``). Reviews without a word
    the model reads are skipped (UsageError if none is left).

    Returns:
        ``{"methods": {name: {"comprehensiveness", "sufficiency", "curve": {...: [per k]}}},
        "reviews", "bins", "most_faithful"}``, ``"random"`` among the methods.
    """
    reads = [r for r in (pipeline.read(t) for t in texts if t.strip()) if r.tokens]
    if not reads:
        raise UsageError("no review with a word the model reads: nothing to explain")
    rng = random.Random(seed)
    names = [*methods, RANDOM]
    sums = {m: np.zeros((2, len(BINS))) for m in names}
    for start in range(0, len(reads), batch_size):
        part = reads[start:start + batch_size]
        orders = _orders(model, pipeline, part, methods, rng)
        base = _probabilities(model, pipeline, [r.ids for r in part])
        perturbed, where = [], []
        for b, r in enumerate(part):
            for m in names:
                for k_i, k in enumerate(BINS):
                    top = set(orders[m][b][:_kept(len(r.ids), k)])
                    without = [t for i, t in enumerate(r.ids) if i not in top]
                    only = [t for i, t in enumerate(r.ids) if i in top]
                    for kind, seq in ((0, without), (1, only)):
                        if seq:
                            perturbed.append(seq)
                            where.append((b, m, kind, k_i))
        probs = _probabilities(model, pipeline, perturbed)
        for (b, m, kind, k_i), p in zip(where, probs, strict=True):
            pos = base[b] >= 0.5
            full = base[b] if pos else 1 - base[b]
            sums[m][kind, k_i] += full - (p if pos else 1 - p)
        for b, r in enumerate(part):   # removing every token: the verdict of no evidence
            for m in names:
                for k_i, k in enumerate(BINS):
                    if _kept(len(r.ids), k) == len(r.ids):
                        pos = base[b] >= 0.5
                        sums[m][0, k_i] += (base[b] if pos else 1 - base[b]) - 0.5
    n = len(reads)
    out = {}
    for m in names:
        curve = sums[m] / n
        out[m] = {"comprehensiveness": float(curve[0].mean()),
                  "sufficiency": float(curve[1].mean()),
                  "curve": {"comprehensiveness": [round(float(x), 4) for x in curve[0]],
                            "sufficiency": [round(float(x), 4) for x in curve[1]]}}
    table = {"methods": out, "reviews": n, "bins": list(BINS)}
    return {**table, "most_faithful": most_faithful(table)}


def measured(result: dict, source: str) -> Measured:
    """A `faithfulness` table as a `attnkit.explain.trust.Measured` of comprehensiveness, the
    random floor and the reviews counted (`MARGIN`, `MIN_REVIEWS`); KeyError, TypeError or
    ValueError when the table is out of shape."""
    methods = result["methods"]
    scores = {m: float(row["comprehensiveness"]) for m, row in methods.items() if m != RANDOM}
    floor = methods[RANDOM]["comprehensiveness"] if RANDOM in methods else None
    reviews = result.get("reviews")
    return Measured(scores, COMPREHENSIVENESS, source,
                    random=None if floor is None else float(floor),
                    count=reviews if isinstance(reviews, int) else None, margin=MARGIN,
                    min_count=MIN_REVIEWS, unit="reviews")


def most_faithful(result: dict) -> str | None:
    """The method to trust (`attnkit.explain.trust.Measured.verdict`): the highest
    comprehensiveness, leading random and every other method by `MARGIN` on at least
    `MIN_REVIEWS` reviews; else None. Comprehensiveness decides: sufficiency saturates when one
    strong word convinces the model."""
    return measured(result, "").verdict()[0]


def _orders(model: SentimentClassifier, pipeline: TextPipeline, reads, methods: Sequence[str],
            rng: random.Random) -> dict[str, list[list[int]]]:
    """For each method, each review's token positions from most to least important."""
    device = next(model.parameters()).device
    # As in `_probabilities`: the 2018 mode attends to padding, so its inputs keep full width.
    keep = max(len(r.ids) for r in reads) if model.config.mask_padding else pipeline.maxlen
    ids, lengths = (t.to(device) for t in pipeline.pad(reads, keep))
    with torch.no_grad():
        probs = torch.sigmoid(model(ids, lengths)).cpu()
    out: dict[str, list[list[int]]] = {}
    for m in methods:
        scores = token_scores(model, ids, lengths, m).float().cpu()
        out[m] = ranked = []
        for b, r in enumerate(reads):
            real = scores[b, pipeline.tokens_in(len(r.ids), keep)]
            if m in SIGNED and probs[b] < 0.5:
                real = -real   # towards the predicted class
            ranked.append(torch.argsort(real, descending=True, stable=True).tolist())
    out[RANDOM] = [rng.sample(range(len(r.ids)), len(r.ids)) for r in reads]
    return out


def format_table(result: dict) -> str:
    """The methods' figures as a small table, each column with the direction that is more
    faithful (comprehensiveness ↑, sufficiency ↓), then which method to trust and why."""
    lines = [f"faithfulness over {result['reviews']} reviews (ERASER; top "
             f"{', '.join(map(str, result['bins']))} % of tokens; area over the curve)",
             f"{'method':24}{'comprehensiveness ↑':>20}{'sufficiency ↓':>15}"]
    for name, row in result["methods"].items():
        lines.append(f"{name:24}{row['comprehensiveness']:>20.4f}{row['sufficiency']:>15.4f}")
    m = measured(result, "")
    best, reason = m.verdict()
    if best is None:
        lines.append(f"no method can be trusted yet: {reason} ({m.figures()}; higher ↑ is more "
                     "faithful)")
    else:
        lines.append(f"trust {best}: removing the tokens it ranks first costs the verdict the "
                     f"most confidence, and {reason} ({m.figures(best)}; higher ↑ is more "
                     "faithful, as is lower sufficiency ↓)")
    return "\n".join(lines)
