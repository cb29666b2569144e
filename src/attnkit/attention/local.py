"""Luong et al. (2015) local attention (local-m and local-p) on top of any score function.

For query ``t`` with aligned position ``p_t`` and half-width ``D``, keys ``|s - p_t| > D`` get
zero weight; inside, ``align * exp(-(s - p_t)^2 / (2 sigma^2))``, ``sigma = D / 2``, ``align``
the masked softmax over the window. As in the paper, rows are not renormalised
(``renormalize=True`` does) and the Gaussian applies to local-p only (``gaussian`` overrides).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from attnkit.attention.base import AttentionMemory, ScoreAttention
from attnkit.attention.masking import masked_softmax


class LocalAttention(ScoreAttention):
    """Local attention: a window of ``2 D + 1`` source positions around an aligned position.

    Args:
        score: the mechanism giving the alignment scores (dot, general, additive...).
        window: ``D`` >= 1, the half-width; ``sigma = D / 2``.
        mode: ``"monotonic"`` (local-m: ``p_t = t``, or ``query_positions[b, t]``, which a
            decoder attending one step at a time must pass) or ``"predictive"`` (local-p: ``p_t =
            S * sigmoid(v_p^T tanh(W_p h_t))``, ``S`` each source's real length).
        query_dim, units: sizes of ``W_p`` (predictive; default ``score.query_dim``).
        gaussian: multiply the window weights by the Gaussian (default: predictive mode only).
        renormalize: divide each row by its sum after the Gaussian (default False, as the paper).

    The common call (`attnkit.attention.base`) plus ``query_positions [batch, Tq]`` -> context
    ``[batch, Tq, value_dim]``, weights ``[batch, Tq, Tk]``.
    """

    def __init__(self, score: ScoreAttention, window: int,
                 mode: Literal["monotonic", "predictive"] = "monotonic",
                 query_dim: int | None = None, units: int | None = None, *,
                 gaussian: bool | None = None, renormalize: bool = False):
        super().__init__()
        if not isinstance(score, ScoreAttention):
            raise ValueError(f"score must be a ScoreAttention, got {type(score).__name__}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window (the half-width D) must be an int >= 1, got {window!r}")
        if mode not in ("monotonic", "predictive"):
            raise ValueError(f"mode must be 'monotonic' or 'predictive', got {mode!r}")
        # Not `self.score`: that name is ScoreAttention's score() method.
        self.inner, self.window, self.mode, self.renormalize = score, window, mode, renormalize
        self.gaussian = (mode == "predictive") if gaussian is None else gaussian
        self.query_dim = score.query_dim if query_dim is None else query_dim
        self.key_dim = score.key_dim
        if mode == "predictive":
            if self.query_dim is None:
                raise ValueError("mode='predictive' needs query_dim (the score does not fix it)")
            units = self.query_dim if units is None else units
            self.position_proj = nn.Linear(self.query_dim, units, bias=False)  # W_p
            self.position_v = nn.Linear(units, 1, bias=False)  # v_p

    def project_keys(self, key: Tensor) -> Tensor:
        return self.inner.project_keys(key)

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.inner.score_projected(query, keys)

    def aligned_positions(self, query: Tensor, memory: AttentionMemory,
                          query_positions: Tensor | None = None) -> Tensor:
        """``p_t`` as floats ``[batch, Tq]`` for ``query [batch, Tq, query_dim]``."""
        batch, tq = query.shape[0], query.shape[1]
        # Positions in at least float32: bfloat16 cannot even hold integers above 256 exactly.
        dtype = torch.promote_types(query.dtype, torch.float32)
        if self.mode == "predictive":
            if query_positions is not None:
                raise ValueError("query_positions is for mode='monotonic'; mode='predictive' "
                                 "predicts the positions from the query")
            if memory.key_mask is None:
                length = torch.full((batch, 1), float(memory.values.shape[1]),
                                    device=query.device, dtype=dtype)
            else:
                length = memory.key_mask.sum(-1, keepdim=True).to(dtype)
            gate = torch.sigmoid(self.position_v(torch.tanh(self.position_proj(query))))
            return length * gate.squeeze(-1).to(dtype)
        if query_positions is None:
            return torch.arange(tq, device=query.device, dtype=dtype).expand(batch, tq)
        if not isinstance(query_positions, Tensor) or tuple(query_positions.shape) != (batch, tq):
            got = tuple(query_positions.shape) if isinstance(query_positions, Tensor) else \
                type(query_positions).__name__
            raise ValueError(f"query_positions must have shape [{batch}, {tq}] "
                             f"([batch, Tq]), got {got}")
        return query_positions.to(device=query.device, dtype=dtype)

    def distribution(self, query: Tensor, memory: AttentionMemory, mask: Tensor | None,
                     query_positions: Tensor | None = None) -> Tensor:
        """The window's weights (see the class docstring): the softmax over the keys within
        ``D`` of ``p_t``, times the Gaussian when it is on, renormalised when asked."""
        tk = memory.values.shape[1]
        p = self.aligned_positions(query, memory, query_positions)  # [batch, Tq]
        offset = torch.arange(tk, device=query.device, dtype=p.dtype) - p.unsqueeze(-1)
        window = offset.abs() <= self.window  # [batch, Tq, Tk]
        mask = window if mask is None else mask & window
        weights = masked_softmax(self.score_projected(query, memory.keys), mask)
        if self.gaussian:
            sigma = self.window / 2.0
            weights = weights * torch.exp(-offset.square() / (2 * sigma**2)).to(weights.dtype)
        if self.renormalize:
            total = weights.sum(-1, keepdim=True)
            # A row with nothing in its window stays all-zero instead of 0/0.
            weights = weights / torch.where(total > 0, total, torch.ones_like(total))
        return weights
