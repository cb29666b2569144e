"""Hard (stochastic) attention: each query attends to exactly one key.

The choice is sampled from a wrapped mechanism's soft weights in training mode and is the
argmax in eval mode. Gradient estimators (Xu et al., 2015): ``"straight_through"`` (one-hot
forward, the soft weights' gradient backward) and ``"reinforce"`` (`HardAttention.reinforce_loss`,
with a running-average baseline).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from attnkit.attention.base import (
    AttentionMemory,
    AttentionOutput,
    ScoreAttention,
    query_mask_from_lengths,
)


class HardAttentionOutput(AttentionOutput):
    """An `AttentionOutput` (unpacks as ``context, weights``) with ``log_prob [batch, Tq]`` of
    each choice and its int64 ``index [batch, Tq]`` (0 and -1 where nothing was chosen)."""

    log_prob: Tensor
    index: Tensor

    def __new__(cls, context: Tensor, weights: Tensor | None, log_prob: Tensor, index: Tensor):
        out = super().__new__(cls, context, weights)
        out.log_prob, out.index = log_prob, index
        return out


class HardAttention(ScoreAttention):
    """Pick one key per query from a score mechanism's soft weights; never a masked key.

    Args:
        mechanism: the score-based mechanism giving the soft weights.
        estimator: ``"straight_through"`` or ``"reinforce"``.
        baseline_momentum: ``m`` in ``baseline <- m * baseline + (1 - m) * mean(reward)``.

    The common call (`attnkit.attention.base`) -> `HardAttentionOutput`, weights one-hot; the
    REINFORCE estimator with `reinforce_loss`: docs/concepts.md ("Examples").
    """

    def __init__(self, mechanism: ScoreAttention,
                 estimator: Literal["straight_through", "reinforce"] = "straight_through",
                 *, baseline_momentum: float = 0.9):
        super().__init__()
        if not isinstance(mechanism, ScoreAttention):
            raise ValueError(f"mechanism must be a ScoreAttention, got {type(mechanism).__name__}")
        if estimator not in ("straight_through", "reinforce"):
            raise ValueError(f"estimator must be 'straight_through' or 'reinforce', "
                             f"got {estimator!r}")
        if not 0.0 <= baseline_momentum < 1.0:
            raise ValueError(f"baseline_momentum must be in [0, 1), got {baseline_momentum}")
        self.mechanism, self.estimator = mechanism, estimator
        self.baseline_momentum = baseline_momentum
        self.query_dim, self.key_dim = mechanism.query_dim, mechanism.key_dim
        self.register_buffer("baseline", torch.zeros(()))
        # Whether `baseline` has seen a reward yet (the first reward initialises it).
        self.register_buffer("baseline_initialised", torch.zeros((), dtype=torch.bool))

    def project_keys(self, key: Tensor) -> Tensor:
        return self.mechanism.project_keys(key)

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.mechanism.score_projected(query, keys)

    def read(self, soft: Tensor, memory: AttentionMemory, query_lengths: Tensor | None,
             need_weights: bool) -> HardAttentionOutput:
        """Choose one key per query from the soft ``weights`` (the mechanism's masked softmax,
        `ScoreAttention.distribution`) and read its value."""
        batch, tq, tk = soft.shape
        valid = soft.detach().sum(-1) > 0  # rows with at least one real key
        qmask = query_mask_from_lengths(query_lengths, batch, tq, soft.device)
        if qmask is not None:
            valid = valid & qmask
        probs = soft.detach().float()
        if self.training:
            # multinomial needs a positive row: give empty rows a dummy choice, dropped below.
            probs = torch.where(valid.unsqueeze(-1), probs, torch.ones_like(probs))
            index = torch.multinomial(probs.reshape(-1, tk), 1).view(batch, tq)
        else:
            index = probs.argmax(-1)
        hard = torch.zeros_like(soft).scatter_(-1, index.unsqueeze(-1), 1.0) * valid.unsqueeze(-1)
        picked = soft.gather(-1, index.unsqueeze(-1)).squeeze(-1)
        # A picked key always has positive probability in valid rows; clamp only guards
        # underflow (log 0) and the dummy choices of invalid rows, which are zeroed anyway.
        log_prob = torch.log(picked.float().clamp_min(torch.finfo(torch.float32).tiny)) * valid
        if self.estimator == "straight_through":
            # value exactly one-hot, gradient of soft
            weights = (hard + (soft - soft.detach())) * valid.unsqueeze(-1)
        else:
            weights = hard
        context = torch.bmm(weights.to(memory.values.dtype), memory.values)
        index = torch.where(valid, index, torch.full_like(index, -1))
        return HardAttentionOutput(context, weights if need_weights else None, log_prob, index)

    def reinforce_loss(self, log_prob: Tensor, reward: Tensor) -> Tensor:
        """REINFORCE surrogate ``mean_b(-(reward_b - baseline) * sum_t log_prob[b, t])``, a scalar.

        ``log_prob [batch, Tq]``, ``reward [batch]`` or ``[batch, Tq]`` (detached here). In training
        mode it then moves the running baseline (a buffer) towards ``mean(reward)``; the first call
        starts it there.
        """
        if log_prob.dim() != 2:
            raise ValueError(f"log_prob must have shape [batch, Tq], got {tuple(log_prob.shape)}")
        reward = reward.detach().to(log_prob.dtype)
        if tuple(reward.shape) not in ((log_prob.shape[0],), tuple(log_prob.shape)):
            raise ValueError(f"reward must have shape [{log_prob.shape[0]}] or "
                             f"{list(log_prob.shape)} ([batch] or [batch, Tq]), "
                             f"got {tuple(reward.shape)}")
        baseline = torch.where(self.baseline_initialised, self.baseline,
                               reward.mean()).to(log_prob.dtype)
        advantage = reward - baseline
        if reward.dim() == 1:
            surrogate = -(advantage * log_prob.sum(-1))
        else:
            surrogate = -(advantage * log_prob).sum(-1)
        if self.training:
            with torch.no_grad():
                m = self.baseline_momentum
                new = torch.where(self.baseline_initialised,
                                  m * self.baseline + (1 - m) * reward.mean().float(),
                                  reward.mean().float())
                self.baseline.copy_(new)
                self.baseline_initialised.fill_(True)
        return surrogate.mean()
