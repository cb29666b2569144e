"""The keras2018 preset against the 2018 Keras model written out in numpy (float64).

The formula is the article's code: ``Embedding`` lookup; ``Position_Embedding`` (sum mode):
``position_j = 1 / 10000^(2 arange(size/2) / size)``, ``position_i = cumsum(ones) - 1``,
``concatenate([cos(i j), sin(i j)])`` added; ``Attention(8, 16)``: ``Q = x WQ`` etc. split into
heads, ``softmax(Q K^T / sqrt(16)) V``, heads concatenated; ``GlobalMaxPooling1D``;
``Dense(1, sigmoid)`` (dropout off). The 2018 code passes no lengths, so padding is attended and
pooled: that is ``mask_padding=False``. With masking, a review without padding is the same
computation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.models.sentiment import SentimentClassifier, SentimentConfig


def keras_2018_logits(model: SentimentClassifier, ids: np.ndarray) -> np.ndarray:
    """The 2018 Keras forward pass in numpy with ``model``'s weights (Keras layouts)."""
    emb = model.embedding.weight.detach().double().numpy()
    packed = model.layers[0].in_proj_weight.detach().double().numpy()
    wq, wk, wv = (w.T for w in np.split(packed, 3))  # Keras Dense kernels are [in, out]
    dense_w = model.classifier.weight.detach().double().numpy()[0]
    dense_b = float(model.classifier.bias.detach())
    heads, size = 8, 16
    x = emb[ids]  # [b, T, 128]
    b, t, dim = x.shape
    position_j = 1.0 / np.power(10000.0, 2 * np.arange(dim / 2) / dim)
    position_i = np.cumsum(np.ones((b, t)), axis=1) - 1
    ij = position_i[..., None] * position_j
    x = x + np.concatenate([np.cos(ij), np.sin(ij)], axis=-1)

    def split(y):  # [b, T, heads*size] -> [b, heads, T, size]
        return y.reshape(b, t, heads, size).transpose(0, 2, 1, 3)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
    a = np.exp(a - a.max(-1, keepdims=True))
    a = a / a.sum(-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, heads * size)
    return o.max(axis=1) @ dense_w + dense_b


@pytest.mark.parametrize("mask_padding", [False, True])
def test_keras2018_preset_is_the_keras_formula(mask_padding):
    torch.manual_seed(0)
    model = SentimentClassifier(SentimentConfig.keras2018(mask_padding=mask_padding)).eval()
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 30000, size=(5, 100))
    lengths = np.full(5, 100)
    if not mask_padding:  # the original attends to padding: pre-padded, as Keras pads
        lengths = np.array([100, 61, 7, 100, 1])
        for i, n in enumerate(lengths):
            ids[i, :100 - n] = 0
    got = model(torch.from_numpy(ids), torch.from_numpy(lengths)).detach().double().numpy()
    want = keras_2018_logits(model, ids)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    train = model.train()(torch.from_numpy(ids), torch.from_numpy(lengths))  # dropout aside,
    assert train.shape == (5,)  # training runs the same kernel


def test_the_formula_sees_the_difference_padding_makes():
    """The check above could not pass by accident: changing the padded ids changes the 2018
    model's output (it attends to padding), and the formula follows."""
    torch.manual_seed(0)
    model = SentimentClassifier(SentimentConfig.keras2018(mask_padding=False)).eval()
    ids = np.random.default_rng(1).integers(1, 30000, size=(2, 100))
    ids[:, :50] = 0
    other = ids.copy()
    other[:, :50] = 5
    lengths = torch.tensor([50, 50])
    a = model(torch.from_numpy(ids), lengths).detach().double().numpy()
    b = model(torch.from_numpy(other), lengths).detach().double().numpy()
    assert np.abs(a - b).max() > 1e-4
    np.testing.assert_allclose(b, keras_2018_logits(model, other), rtol=0, atol=2e-6)
