"""Masked cross-entropy for sequence outputs: padding ignored, mean over real tokens."""

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
