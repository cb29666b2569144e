"""Attention rollout against a hand computation."""

from __future__ import annotations

import torch

from attnkit.attention.rollout import attention_rollout, rollout_cross


def test_rollout_by_hand():
    a1 = torch.tensor([[[[0.5, 0.5], [0.0, 1.0]]]])              # [1, heads=1, 2, 2]
    a2 = torch.tensor([[[[1.0, 0.0], [0.25, 0.75]], [[0.0, 1.0], [0.25, 0.75]]]])  # 2 heads
    # No residual: heads averaged, A2 A1 with A2 = [[.5, .5], [.25, .75]].
    want = torch.tensor([[0.5, 0.5], [0.25, 0.75]]) @ torch.tensor([[0.5, 0.5], [0.0, 1.0]])
    assert torch.allclose(attention_rollout([a1, a2], residual=0.0)[0], want)
    # Residual 0.5: (A + I) / 2 (rows already sum to 1).
    r1 = 0.5 * torch.tensor([[0.5, 0.5], [0.0, 1.0]]) + 0.5 * torch.eye(2)
    r2 = 0.5 * torch.tensor([[0.5, 0.5], [0.25, 0.75]]) + 0.5 * torch.eye(2)
    assert torch.allclose(attention_rollout([a1, a2])[0], r2 @ r1)
    assert torch.allclose(attention_rollout([a1, a2]).sum(-1), torch.ones(1, 2))


def test_cross_rollout_sums_to_one():
    cross = [torch.softmax(torch.randn(1, 2, 3, 4), -1) for _ in range(2)]
    enc = [torch.softmax(torch.randn(1, 2, 4, 4), -1) for _ in range(3)]
    out = rollout_cross(cross, enc)
    assert out.shape == (1, 3, 4) and torch.allclose(out.sum(-1), torch.ones(1, 3))
    mean = (cross[0].mean(1) + cross[1].mean(1)) / 2
    assert torch.allclose(out, mean @ attention_rollout(enc))
