"""Learning-rate schedules as a pure function of the optimizer step (so resume is exact)."""

from __future__ import annotations

import math

import torch

from attnkit.training.config import SCHEDULES


def lr_factor(schedule: str, step: int, warmup_steps: int, total_steps: int) -> float:
    """Multiplier of the peak learning rate for optimizer step ``step`` (0-based).

    Warm-up (every schedule): ``(step + 1) / warmup_steps`` while ``step < warmup_steps``. Then:

    * ``constant``: 1.
    * ``linear``: from 1 down to 0 at ``total_steps``.
    * ``cosine``: ``0.5 (1 + cos(pi p))``, ``p`` the fraction of post-warm-up steps done.
    * ``inverse_sqrt``: ``sqrt(max(warmup_steps, 1) / (step + 1))`` (continuous at the end of
      warm-up, as in "Attention is all you need").
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "inverse_sqrt":
        return math.sqrt(max(warmup_steps, 1) / (step + 1))
    span = max(total_steps - warmup_steps, 1)
    progress = min(max((step - warmup_steps) / span, 0.0), 1.0)
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def apply_lr(optimizer: torch.optim.Optimizer, base_lr: float, factor: float) -> float:
    """Set every param group's lr to ``base_lr * factor``; return it."""
    lr = base_lr * factor
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr
