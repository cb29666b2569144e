"""Position encodings: sinusoidal layouts against their formulas, learned, rotary properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnkit.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)


def test_interleaved_is_vaswani():
    pe = SinusoidalPositionalEncoding(6).encoding(5).double().numpy()
    for t in range(5):
        for i in range(3):
            angle = t / 10000 ** (2 * i / 6)
            assert pe[t, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[t, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)


def test_cos_sin_is_keras_2018_layer():
    # The Keras layer: position_j = 1 / 10000^(2 arange(size/2) / size), position_i = 0..T-1,
    # concatenate([cos(i j), sin(i j)]).
    size, length = 8, 7
    j = 1.0 / np.power(10000.0, 2 * np.arange(size / 2) / size)
    ij = np.arange(length)[:, None] * j[None, :]
    want = np.concatenate([np.cos(ij), np.sin(ij)], axis=1)
    got = SinusoidalPositionalEncoding(size, layout="cos_sin").encoding(length).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_sum_and_concat():
    x = torch.randn(2, 5, 6)
    s = SinusoidalPositionalEncoding(6)
    torch.testing.assert_close(s(x), x + s.encoding(5))
    c = SinusoidalPositionalEncoding(4, mode="concat", layout="cos_sin")
    out = c(x)
    assert out.shape == (2, 5, 10)
    torch.testing.assert_close(out[..., :6], x)
    torch.testing.assert_close(out[0, :, 6:], c.encoding(5))
    torch.testing.assert_close(s(x[:, 3:], offset=3), x[:, 3:] + s.encoding(5)[3:])


def test_sinusoidal_errors():
    with pytest.raises(ValueError, match="even"):
        SinusoidalPositionalEncoding(5)
    with pytest.raises(ValueError, match="layout"):
        SinusoidalPositionalEncoding(4, layout="bad")
    with pytest.raises(ValueError, match=r"\[batch, time, 4\]"):
        SinusoidalPositionalEncoding(4)(torch.randn(1, 2, 6))
    with pytest.raises(ValueError, match=r"\[batch, time, dim\]"):
        SinusoidalPositionalEncoding(4)(torch.randn(2, 4))


def test_learned():
    pe = LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 6, 4)
    torch.testing.assert_close(pe(x), x + pe.weight[:6])
    torch.testing.assert_close(pe(x[:, :2], offset=8), x[:, :2] + pe.weight[8:])
    cat = LearnedPositionalEmbedding(10, 3, mode="concat")
    assert cat(x).shape == (2, 6, 7)
    with pytest.raises(ValueError, match="max_len=10"):
        pe(torch.randn(1, 11, 4))
    with pytest.raises(ValueError, match="max_len=10"):
        pe(x, offset=5)
    with pytest.raises(ValueError, match="mode"):
        LearnedPositionalEmbedding(10, 4, mode="add")


def _rotated(rope, x, pos):
    return rope(x, torch.tensor(pos))


def test_rope_relative_position_and_norm():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8,
                                                                         dtype=torch.float64)
    scores = []
    for m, n in [(3, 1), (10, 8), (102, 100)]:  # the same difference 2
        scores.append(float((_rotated(rope, q, [m]) * _rotated(rope, k, [n])).sum()))
    assert max(scores) - min(scores) < 1e-6
    other = float((_rotated(rope, q, [5]) * _rotated(rope, k, [1])).sum())
    assert abs(other - scores[0]) > 1e-3
    x = torch.randn(2, 3, 7, 8)
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))


def test_rope_rotate_half_convention_and_positions():
    rope = RotaryEmbedding(4, base=100.0)
    x = torch.randn(2, 1, 3, 4)
    out = rope(x)
    torch.testing.assert_close(out[:, :, 0], x[:, :, 0])  # position 0: identity
    # position 1: pair (0, 2) turns by 1 rad, pair (1, 3) by 1/100^(2/4) = 0.1 rad
    for i, angle in ((0, 1.0), (1, 0.1)):
        a, b = x[:, 0, 1, i], x[:, 0, 1, i + 2]
        torch.testing.assert_close(out[:, 0, 1, i], a * math.cos(angle) - b * math.sin(angle))
        torch.testing.assert_close(out[:, 0, 1, i + 2], a * math.sin(angle) + b * math.cos(angle))
    per_batch = rope(x, torch.tensor([[0, 1, 2], [5, 6, 7]]))
    torch.testing.assert_close(per_batch[1], rope(x[1:], torch.tensor([5, 6, 7]))[0])
    with pytest.raises(ValueError, match=r"positions must have shape \[3\]"):
        rope(x, torch.arange(4))
    with pytest.raises(ValueError, match=r"\[batch, heads, time, 4\]"):
        rope(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
