"""Per-token explanations of a sentiment model's verdict, by method: its attention (the share
of the decision passed back through the last layer, `SentimentClassifier.explain`), attention
rollout through every layer, gradient x input and integrated gradients of the logit with
respect to the token vectors (Captum, `attnkit.explain.captum`).

Attention and rollout are shares (>= 0, summing to 1); the gradient methods are signed
(> 0 pushes towards "positive") and sum, for integrated gradients, to the logit minus the
logit of all-zero token vectors.

Example:
    ```python
    scores = token_scores(model, ids, lengths, "integrated-gradients")   # [batch, time]
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor

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


def token_scores(model: SentimentClassifier, ids: Tensor, lengths: Tensor, method: str, *,
                 steps: int = IG_STEPS) -> Tensor:
    """``[batch, time]`` scores of each token by ``method`` (0 on padding).

    Raises:
        ValueError: an unknown method.
        UsageError: Captum missing for a gradient method.
    """
    if method == "attention":
        return model.explain(ids, lengths)[1]
    if method == "rollout":
        return model.rollout(ids, lengths)
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
