"""Masked cross-entropy for sequence outputs: padding ignored, mean over real tokens.

Padded rows never reach the softmax; the rest is ``torch.nn.functional.cross_entropy`` (with
its label smoothing: ``1 - eps`` on the gold token, ``eps`` spread over all ``V`` classes).

Example:
    ```python
    loss, count = masked_cross_entropy(logits, batch["tgt_out"], pad_id=0, label_smoothing=0.1)
    ```
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def masked_cross_entropy(logits: Tensor, targets: Tensor, *, pad_id: int | None = None,
                         lengths: Tensor | None = None,
                         label_smoothing: float = 0.0) -> tuple[Tensor, int]:
    """Mean token cross-entropy of ``logits [batch, T, V]`` over the real ``targets [batch, T]``.

    Padding is where the target is ``pad_id`` and/or ``t >= lengths[b]``. Returns ``(loss,
    count)``: the mean (0 without real tokens) and the number of real tokens.
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be [batch, T, V] and targets [batch, T]; got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
    if pad_id is None and lengths is None:
        raise ValueError("give pad_id or lengths so padding can be ignored")
    mask = torch.ones_like(targets, dtype=torch.bool)
    if pad_id is not None:
        mask &= targets != pad_id
    if lengths is not None:
        positions = torch.arange(targets.shape[1], device=targets.device)
        mask &= positions.unsqueeze(0) < lengths.to(targets.device).unsqueeze(1)
    count = int(mask.sum())
    if count == 0:
        return logits.sum() * 0.0, 0
    # Per token, then the mean: the library's own mean sums in another order, which moves
    # the last bits of every run's weights.
    loss = F.cross_entropy(logits[mask].float(), targets[mask], reduction="none",
                           label_smoothing=label_smoothing)
    return loss.mean(), count
