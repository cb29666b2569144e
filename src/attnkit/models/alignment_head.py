"""A supervised alignment head on a trained Transformer (after Garg et al. 2019).

The head scores every (target piece, source piece) pair of a forced decoding from what the
frozen model computed (decoder states, encoder outputs, cross-attention weights, the distance
from the diagonal) and is trained against alignment labels in both directions
(docs/concepts.md, "The alignment head"). The translation model is never changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.masking import masked_softmax
from attnkit.models.config import JsonConfig

EPS = 1e-6


@dataclass
class AlignmentHeadConfig(JsonConfig):
    """The sizes of an `AlignmentHead`: the model's ``d_model``, ``layers``, ``heads``; the
    query ``layer`` (-1 the last); ``d_head`` of the bilinear score; ``attention_features``.
    """

    d_model: int
    layers: int
    heads: int
    layer: int = -1
    d_head: int = 128
    attention_features: bool = True

    @property
    def features(self) -> int:
        """Per-cell features of the linear part: 2 rows x layers x heads, and the diagonal."""
        return (2 * self.layers * self.heads if self.attention_features else 0) + 1


def cell_features(attention: Tensor, n: int, s: int) -> Tensor:
    """The per-cell features of one pair: ``attention [layers, heads, n + 1, S]`` (forced
    decoding) -> ``[n, S, 2 * layers * heads + 1]`` (log-attention at the predicting row
    ``r`` and the reading row ``r + 1`` of piece ``r``, then the distance to the diagonal)."""
    logw = torch.log(attention.float() + EPS).flatten(0, 1)          # [L*H, n+1, S]
    predict, read = logw[:, :n], logw[:, 1:n + 1]
    rows = (torch.arange(n, dtype=torch.float32)[:, None] + 0.5) / n
    cols = (torch.arange(s, dtype=torch.float32)[None, :] + 0.5) / s
    diagonal = (rows - cols).abs()[None]
    return torch.cat([predict, read, diagonal]).permute(1, 2, 0)


class AlignmentHead(nn.Module):
    """``head(query [batch, n, d], memory [batch, S, d], features [batch, n, S, F], src_mask,
    tgt_mask)`` -> scores ``[batch, n, S]``; padded cells score the lowest finite value.
    """

    def __init__(self, config: AlignmentHeadConfig):
        super().__init__()
        self.config = c = config
        self.norm_q, self.norm_k = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.q = nn.Linear(c.d_model, c.d_head)
        self.k = nn.Linear(c.d_model, c.d_head)
        self.mix = nn.Linear(c.features, 1)
        with torch.no_grad():   # start from the averaged attention and a diagonal preference
            self.mix.weight.zero_()
            if c.attention_features:
                self.mix.weight[0, :-1] = 1.0 / (c.features - 1)
            self.mix.weight[0, -1] = -1.0

    def forward(self, query: Tensor, memory: Tensor, features: Tensor, src_mask: Tensor,
                tgt_mask: Tensor) -> Tensor:
        c = self.config
        q = self.q(self.norm_q(query))
        k = self.k(self.norm_k(memory))
        scores = torch.einsum("bnd,bsd->bns", q, k) / math.sqrt(c.d_head)
        if not c.attention_features:
            features = features[..., -1:]
        scores = scores + self.mix(features).squeeze(-1)
        valid = tgt_mask[:, :, None] & src_mask[:, None, :]
        return scores.masked_fill(~valid, torch.finfo(scores.dtype).min)


def directions(scores: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Both directions of head scores ``[batch, n, S]``: each target piece's distribution over
    the source, and each source piece's over the target; exactly 0 at padding
    (``src_mask [batch, S]``, ``tgt_mask [batch, n]``, True at real pieces)."""
    valid = tgt_mask[:, :, None] & src_mask[:, None, :]
    return masked_softmax(scores, valid, dim=-1), masked_softmax(scores, valid, dim=-2)


def alignment_loss(scores: Tensor, labels: Tensor, src_mask: Tensor, tgt_mask: Tensor
                   ) -> Tensor:
    """Cross-entropy against 0/1 ``labels [batch, n, S]`` in both directions, over labelled pieces.

    Each labelled piece contributes ``-sum_s y_s log p(s | r)``, ``y`` its labels normalised; the
    mean over both directions (0 without a label).
    """
    labels = labels.float() * (tgt_mask[:, :, None] & src_mask[:, None, :])
    total, count = scores.new_zeros(()), 0
    for dim in (-1, -2):
        logp = torch.log_softmax(scores, dim=dim).masked_fill(labels == 0, 0.0)
        mass = labels.sum(dim, keepdim=True)
        has = mass.squeeze(dim) > 0
        target = labels / mass.clamp_min(1.0)
        total = total - (target * logp).sum(dim)[has].sum()
        count += int(has.sum())
    return total / max(count, 1)
