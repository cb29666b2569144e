"""Luong "general" (bilinear) attention: ``score(q, k) = q^T W k``."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.attention.base import ScoreAttention


class GeneralAttention(ScoreAttention):
    """Bilinear attention of Luong et al. (2015), the "general" score ``q^T W k``.

    ``W [query_dim, key_dim]``; ``memory()`` projects the keys once per source as ``k W^T``, so
    every decoder step is one batched matmul. The common call (`attnkit.attention.base`).
    """

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        if query_dim < 1 or key_dim < 1:
            raise ValueError(f"query_dim and key_dim must be >= 1, got {query_dim}, {key_dim}")
        self.query_dim, self.key_dim = query_dim, key_dim
        # nn.Linear(key_dim -> query_dim) holds W [query_dim, key_dim] and computes k W^T.
        self.weight_proj = nn.Linear(key_dim, query_dim, bias=False)

    @property
    def weight(self) -> Tensor:
        """``W [query_dim, key_dim]`` of ``score = q^T W k``."""
        return self.weight_proj.weight

    def project_keys(self, key: Tensor) -> Tensor:
        """``key [batch, Tk, key_dim]`` -> ``k W^T [batch, Tk, query_dim]``."""
        return self.weight_proj(key)

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:
        """``query [batch, Tq, query_dim]``, ``keys [batch, Tk, query_dim]`` -> scores
        ``[batch, Tq, Tk]``."""
        return torch.bmm(query, keys.transpose(1, 2))
