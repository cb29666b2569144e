"""How faithful each explanation of a sentiment verdict is: ERASER's comprehensiveness and
sufficiency (DeYoung et al. 2020), with random token orders as the floor.

Comprehensiveness is ``p - p(without the top k % tokens)``, sufficiency ``p - p(those tokens
alone)``, for ``k`` in 1, 5, 10, 20, 50 %, averaged over ``k`` then reviews; a removed token
is deleted, as ERASER does. The method: docs/concepts.md, "Sentiment"."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch

from attnkit.data.review_pipeline import TextPipeline, pad_sequences
from attnkit.errors import UsageError
from attnkit.explain.sentiment import SIGNED, token_scores
from attnkit.explain.trust import Measured
from attnkit.models.sentiment import SentimentClassifier

BINS = (1, 5, 10, 20, 50)
RANDOM = "random"
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
                 methods: Sequence[str] = ("attention", "rollout", "grad-input",
                                           "integrated-gradients"),
                 seed: int = 0, batch_size: int = 32) -> dict:
    """Comprehensiveness and sufficiency of each of ``methods`` and of random orders (``seed``).

    Reviews without a word the model reads are skipped (UsageError if none is left).

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
        ranked = []
        for b, r in enumerate(reads):
            real = scores[b, pipeline.tokens_in(len(r.ids), keep)]
            if m in SIGNED and probs[b] < 0.5:
                real = -real   # towards the predicted class
            ranked.append(torch.argsort(real, descending=True, stable=True).tolist())
        out[m] = ranked
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
    lines.append(trust_line(result))
    return "\n".join(lines)


def trust_line(result: dict) -> str:
    """Which method to trust, and why, in one sentence; or why none can be trusted yet."""
    m = measured(result, "")
    best, reason = m.verdict()
    if best is None:
        return f"no method can be trusted yet: {reason} ({m.figures()}; higher ↑ is more " \
            "faithful)"
    return (f"trust {best}: removing the tokens it ranks first costs the verdict the most "
            f"confidence, and {reason} ({m.figures(best)}; higher ↑ is more faithful, as is "
            "lower sufficiency ↓)")
