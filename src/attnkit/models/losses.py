"""Masked cross-entropy for sequence outputs: padding ignored, mean over real tokens.

Label smoothing (Szegedy et al. 2016) with ``eps``: the target distribution puts ``1 - eps`` on
the gold token and spreads ``eps`` uniformly over all ``V`` classes (the gold one included, as
``torch.nn.functional.cross_entropy(label_smoothing=eps)`` does), so per token:
    ```python
    loss = (1 - eps) * (-log p[gold]) + eps * mean_v(-log p[v])
    ```

Example:
    ```python
    loss, count = masked_cross_entropy(logits, batch["tgt_out"], pad_id=0, label_smoothing=0.1)
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor


def masked_cross_entropy(logits: Tensor, targets: Tensor, *, pad_id: int | None = None,
                         lengths: Tensor | None = None,
                         label_smoothing: float = 0.0) -> tuple[Tensor, int]:
    """Mean token cross-entropy over real (non-padding) target positions.

    Args:
        logits: ``[batch, T, V]`` unnormalised scores.
        targets: ``[batch, T]`` gold ids.
        pad_id: positions whose target equals it are padding.
        lengths: ``[batch]`` real target lengths (positions ``t >= lengths[b]`` are padding).
            Give ``pad_id``, ``lengths`` or both (combined with AND).
        label_smoothing: ``eps`` in ``[0, 1)``.

    Returns:
        ``(loss, count)``: the mean over real tokens (a scalar tensor; 0 when there are none)
        and the number of real tokens. Logits at padded positions never affect the loss or its
        gradient.
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
    real_logits = logits[mask].float()          # [N, V]: padded rows never reach the softmax
    count = int(mask.sum())
    if count == 0:
        return logits.sum() * 0.0, 0
    logp = torch.log_softmax(real_logits, dim=-1)
    nll = -logp.gather(1, targets[mask].unsqueeze(1)).squeeze(1)
    if label_smoothing > 0:
        nll = (1.0 - label_smoothing) * nll - label_smoothing * logp.mean(dim=-1)
    return nll.mean(), count
