"""Training a run's alignment head on labelled pairs: the frozen translation model's forced
decoding gives the head's inputs once, then the head alone is fitted (seconds per thousand
pairs on a CPU).

Example:
    ```python
    examples = head_examples(model, head.config, pairs, labels)
    report = fit_head(head, examples, seconds=60)     # {"steps", "epochs", "loss", ...}
    ```
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.apps.base import Log, quiet
from attnkit.apps.translate.alignment.pieces import PairPieces
from attnkit.decoding.forced import forced_decode
from attnkit.models.alignment_head import (
    AlignmentHead,
    AlignmentHeadConfig,
    alignment_loss,
    cell_features,
)


@dataclass
class HeadExample:
    """One pair's head inputs and labels: ``query [n, d]``, ``memory [S, d]``,
    ``features [n, S, F]``, ``labels [n, S]``."""

    query: Tensor
    memory: Tensor
    features: Tensor
    labels: Tensor


def head_examples(model: nn.Module, config: AlignmentHeadConfig, pairs: Sequence[PairPieces],
                  labels: Sequence[Tensor], *, batch_size: int = 64) -> list[HeadExample]:
    """The head's inputs for labelled pairs, from one forced decoding of each."""
    out = []
    for start in range(0, len(pairs), 512):   # bounded memory: states of 512 pairs at a time
        chunk = pairs[start:start + 512]
        forced = forced_decode(model, [p.src_ids for p in chunk], [p.tgt_ids for p in chunk],
                               batch_size=batch_size, keep_states=True, logprobs=False)
        for pair, f, y in zip(chunk, forced, labels[start:start + 512], strict=True):
            n, s = len(pair.tgt_ids), len(pair.src_ids)
            out.append(HeadExample(f.states[config.layer][1:n + 1], f.memory,
                                   cell_features(f.attention, n, s), y))
    return out


def _batch(examples: Sequence[HeadExample]) -> tuple[Tensor, ...]:
    n = max(e.query.shape[0] for e in examples)
    s = max(e.memory.shape[0] for e in examples)
    b, d, f = len(examples), examples[0].query.shape[1], examples[0].features.shape[-1]
    query, memory = torch.zeros(b, n, d), torch.zeros(b, s, d)
    feats, labels = torch.zeros(b, n, s, f), torch.zeros(b, n, s)
    src_mask = torch.zeros(b, s, dtype=torch.bool)
    tgt_mask = torch.zeros(b, n, dtype=torch.bool)
    for k, e in enumerate(examples):
        ni, si = e.query.shape[0], e.memory.shape[0]
        query[k, :ni], memory[k, :si] = e.query, e.memory
        feats[k, :ni, :si], labels[k, :ni, :si] = e.features, e.labels
        src_mask[k, :si], tgt_mask[k, :ni] = True, True
    return query, memory, feats, labels, src_mask, tgt_mask


def fit_head(head: AlignmentHead, examples: Sequence[HeadExample], *,
             seconds: float | None = None, epochs: int = 20, lr: float = 2e-3,
             batch_size: int = 32, seed: int = 0, log: Log = quiet) -> dict[str, float]:
    """Fit the head to its examples' labels (AdamW, batches of similar length).

    Args:
        head: the head (trained in place).
        examples: `head_examples`.
        seconds: stop after this much time (None: no limit).
        epochs: at most this many passes.
        lr: the learning rate.
        batch_size: pairs per step.
        seed: the batch order.
        log: a line per epoch.

    Returns:
        ``{"steps", "epochs", "seconds", "loss"}`` (the last epoch's mean loss).
    """
    labelled = [e for e in examples if e.labels.any()]
    if not labelled:
        return {"steps": 0, "epochs": 0, "seconds": 0.0, "loss": float("nan")}
    rng = random.Random(seed)
    order = sorted(range(len(labelled)), key=lambda k: labelled[k].features.shape[:2])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)
    head.train()
    start, steps, loss_sum, done, epoch = time.monotonic(), 0, 0.0, 0, 0
    out_of_time = False
    for epoch in range(1, epochs + 1):
        rng.shuffle(batches)
        loss_sum, done = 0.0, 0
        for rows in batches:
            *inputs, labels, src_mask, tgt_mask = _batch([labelled[k] for k in rows])
            scores = head(*inputs, src_mask, tgt_mask)
            loss = alignment_loss(scores, labels, src_mask, tgt_mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum, done, steps = loss_sum + loss.item(), done + 1, steps + 1
            if seconds is not None and time.monotonic() - start > seconds:
                out_of_time = True
                break
        log(f"alignment head: epoch {epoch}, loss {loss_sum / done:.4f}, "
            f"{time.monotonic() - start:.0f} s")
        if out_of_time:
            break
    head.eval()
    return {"steps": steps, "epochs": epoch, "seconds": round(time.monotonic() - start, 1),
            "loss": loss_sum / max(done, 1)}
