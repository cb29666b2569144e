"""Losses of sequence outputs: masked cross-entropy (padding ignored, mean over real tokens)
and the alignment loss on an attention head (Garg et al. 2019)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def masked_cross_entropy(logits: Tensor, targets: Tensor, *, pad_id: int,
                         label_smoothing: float = 0.0) -> tuple[Tensor, int]:
    """Mean token cross-entropy of ``logits [batch, T, V]`` over the ``targets [batch, T]`` that
    are not ``pad_id`` (``F.cross_entropy``'s label smoothing): ``(loss, count)``, the mean (0
    without real tokens) and the number of real tokens."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be [batch, T, V] and targets [batch, T]; got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    mask = targets != pad_id
    count = int(mask.sum())
    if count == 0:
        return logits.sum() * 0.0, 0
    # Per token, then the mean: the library's own mean sums in another order, which moves
    # the last bits of every run's weights.
    loss = F.cross_entropy(logits[mask].float(), targets[mask], reduction="none",
                           label_smoothing=label_smoothing)
    return loss.mean(), count


def alignment_loss(attention: Tensor, links: Tensor) -> Tensor:
    """Garg et al. (2019)'s supervised attention: the cross-entropy of one head's attention
    ``[batch, T, S]`` against the ``links [batch, T, S]`` (0/1) normalised per row,
    ``-sum_s (G[t, s] / sum_s' G[t, s']) * log A[t, s]``, averaged over the rows with a link
    (rows without one add nothing; 0 when there is none).

    Example (one row linked to key 0, which the head gives 0.5: ``-log 0.5``)::

        a = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]])
        alignment_loss(a, torch.tensor([[[1.0, 0.0], [0.0, 0.0]]]))   # tensor(0.6931)
    """
    if attention.shape != links.shape or attention.dim() != 3:
        raise ValueError(f"attention and links must both be [batch, T, S], got "
                         f"{tuple(attention.shape)} and {tuple(links.shape)}")
    per_row = links.sum(-1, keepdim=True)
    target = links / per_row.clamp_min(1)
    # A linked key the mask zeroed would be log 0: clamped, it costs a large finite loss.
    loss = -(target * attention.float().clamp_min(1e-9).log()).sum()
    return loss / (per_row > 0).sum().clamp_min(1)
