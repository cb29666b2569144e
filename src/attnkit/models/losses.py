"""Masked cross-entropy for sequence outputs: padding ignored, mean over real tokens.

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
    """``F.cross_entropy`` (with ``label_smoothing``) averaged over the real target positions.

    Args:
        logits: ``[batch, T, V]`` unnormalised scores.
        targets: ``[batch, T]`` gold ids.
        pad_id: positions whose target equals it are padding.
        lengths: ``[batch]`` real target lengths (positions ``t >= lengths[b]`` are padding).
            Give ``pad_id``, ``lengths`` or both (combined with AND).

    Returns:
        ``(loss, count)``: the mean over real tokens (0 when there are none) and their number.
        Padded rows never reach the softmax, so they affect neither the loss nor its gradient.
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be [batch, T, V] and targets [batch, T]; got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
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
    # Per token, then the mean: ``ignore_index`` with the library's own mean sums in another
    # order, which moves the last bits of every run's weights.
    loss = F.cross_entropy(logits[mask].float(), targets[mask], reduction="none",
                           label_smoothing=label_smoothing)
    return loss.mean(), count
