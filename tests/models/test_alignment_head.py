"""The supervised alignment head: its loss against a hand computation, both directions'
normalisation, padding that changes nothing, and finite gradients."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.models.alignment_head import (
    AlignmentHead,
    AlignmentHeadConfig,
    alignment_loss,
    cell_features,
    directions,
)


def test_loss_by_hand():
    scores = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])      # [1, n=2, S=2]
    labels = torch.tensor([[[0.0, 1.0], [1.0, 1.0]]])
    ones = torch.ones(1, 2, dtype=torch.bool)
    # Forward: row 0 -> -log(3/4); row 1 (two labels, 1/2 each) -> -log(1/2).
    # Reverse: column 0 (label on row 1) -> -log(1/2); column 1 (both rows, 1/2 each):
    # -(1/2) log(3/4) - (1/2) log(1/4).
    want = (-math.log(0.75) - math.log(0.5) - math.log(0.5)
            - 0.5 * math.log(0.75) - 0.5 * math.log(0.25)) / 4
    assert alignment_loss(scores, labels, ones, ones).item() == pytest.approx(want, rel=1e-6)
    assert alignment_loss(scores, torch.zeros_like(labels), ones, ones).item() == 0.0


def test_padding_changes_nothing_and_gradients_are_finite():
    torch.manual_seed(0)
    config = AlignmentHeadConfig(d_model=8, layers=2, heads=2, d_head=4)
    head = AlignmentHead(config)
    n, s = 3, 4
    query, memory = torch.randn(1, n, 8), torch.randn(1, s, 8)
    feats = cell_features(torch.softmax(torch.randn(2, 2, n + 1, s), -1), n, s)[None]
    labels = torch.zeros(1, n, s)
    labels[0, 0, 1] = labels[0, 2, 3] = 1
    full = alignment_loss(head(query, memory, feats, torch.ones(1, s, dtype=torch.bool),
                               torch.ones(1, n, dtype=torch.bool)), labels,
                          torch.ones(1, s, dtype=torch.bool), torch.ones(1, n, dtype=torch.bool))
    # The same pair padded to n + 2, S + 3, beside a second, labelled pair.
    pad_q = torch.cat([torch.cat([query, torch.zeros(1, 2, 8)], 1), torch.randn(1, n + 2, 8)])
    pad_m = torch.cat([torch.cat([memory, torch.zeros(1, 3, 8)], 1), torch.randn(1, s + 3, 8)])
    pad_f = torch.zeros(2, n + 2, s + 3, config.features)
    pad_f[0, :n, :s] = feats[0]
    pad_y = torch.zeros(2, n + 2, s + 3)
    pad_y[0, :n, :s] = labels[0]
    src_mask = torch.tensor([[True] * s + [False] * 3, [True] * (s + 3)])
    tgt_mask = torch.tensor([[True] * n + [False] * 2, [True] * (n + 2)])
    scores = head(pad_q, pad_m, pad_f, src_mask, tgt_mask)
    alone = alignment_loss(scores[:1], pad_y[:1], src_mask[:1], tgt_mask[:1])
    assert alone.item() == pytest.approx(full.item(), rel=1e-5)
    pad_y[1, 0, 0] = 1
    alignment_loss(scores, pad_y, src_mask, tgt_mask).backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters())
    assert torch.isfinite(scores).all()                        # padding is never -inf
    fwd, rev = directions(scores.detach(), src_mask, tgt_mask)
    assert torch.allclose(fwd[0, :n].sum(-1), torch.ones(n))
    assert torch.allclose(rev[0, :, :s].sum(-2), torch.ones(s))
    # Padded cells, and the rows and columns made only of padding, are exactly 0 (not NaN).
    assert fwd[0, :, s:].abs().sum() == 0 and rev[0, n:].abs().sum() == 0
    assert fwd[0, n:].abs().sum() == 0 and rev[0, :, s:].abs().sum() == 0


def test_cell_features():
    w = torch.softmax(torch.randn(2, 3, 5, 4), -1)      # L=2, H=3, n+1=5 rows, S=4
    f = cell_features(w, 4, 4)
    assert f.shape == (4, 4, 2 * 2 * 3 + 1)
    assert torch.allclose(f[2, 1, 0], torch.log(w[0, 0, 2, 1] + 1e-6))     # predicting row
    assert torch.allclose(f[2, 1, 6], torch.log(w[0, 0, 3, 1] + 1e-6))     # reading row
    assert f[0, 0, -1] == pytest.approx(0.0) and f[0, 3, -1] == pytest.approx(0.75)
