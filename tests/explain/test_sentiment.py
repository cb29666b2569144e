"""explain.sentiment: the attention scores a distribution over the real tokens (the
trace-back recomputed feature by feature), and signed contributions that add up to the logit."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.classification_text import pad_sequences
from attnkit.explain.sentiment import attribute, token_scores
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig


def _small(**kw) -> SentimentConfig:
    return SentimentConfig.keras2018(vocab_size=50, embed_dim=16, num_heads=2, head_dim=8,
                                     maxlen=32, **kw)


def _batch(padding: str):
    return pad_sequences([[5, 6, 7, 8, 9], [10, 11], list(range(20, 32))], 12, padding=padding,
                         truncating="post")


@pytest.mark.parametrize("cfg", [dict(), dict(pooling="attention"), dict(mask_padding=False)])
@pytest.mark.parametrize("padding", ["pre", "post"])
def test_explanation_is_a_distribution_over_real_tokens(cfg, padding):
    torch.manual_seed(1)
    model = SentimentClassifier(_small(padding=padding, **cfg)).eval()
    ids, lengths = _batch(padding)
    prob, scores, _ = attribute(model, ids, lengths)
    torch.testing.assert_close(prob, torch.sigmoid(model(ids, lengths)))
    mask = model.real_mask(lengths, ids.shape[1])
    assert scores.shape == ids.shape
    assert torch.all(scores[~mask] == 0) and torch.all(scores >= 0)
    torch.testing.assert_close(scores.sum(-1), torch.ones(3))
    if not cfg:
        # max pooling: recompute the trace-back independently, feature by feature
        with torch.no_grad():
            x, m, attn = model.encode(ids, lengths, need_weights=True)
        w = model.classifier.weight[0].detach()
        for b in range(3):
            expected = torch.zeros(ids.shape[1])
            for d in range(x.shape[-1]):
                col = x[b, :, d].masked_fill(~m[b], float("-inf"))
                q = int(col.argmax())
                expected += abs(float(w[d] * col[q])) * attn[-1][b, d // 8, q]
            expected = expected * m[b]
            torch.testing.assert_close(scores[b], expected / expected.sum())


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", [
    dict(),  # the 2018 layer, max pooling
    dict(block="transformer", num_layers=2, pooling="attention", attn_bias=True,
         attn_out_proj=True, ffn_dim=32),
    dict(block="transformer", pooling="max", attn_out_proj=True, ffn_dim=32),
])
def test_contributions_sum_to_the_logit(padding, cfg):
    torch.manual_seed(0)
    model = SentimentClassifier(SentimentConfig.keras2018(
        vocab_size=50, embed_dim=16, num_heads=2, head_dim=8, maxlen=12, padding=padding,
        **cfg)).eval()
    ids, lengths = pad_sequences([[5, 6, 7, 8, 9], [10, 11], list(range(20, 32))], 12,
                                 padding=padding)
    prob, scores, signed = attribute(model, ids, lengths)
    logit = model(ids, lengths)
    assert torch.allclose(signed.sum(-1), logit - model.classifier.bias, atol=1e-5)
    assert torch.allclose(prob, torch.sigmoid(logit), atol=1e-6)
    real = model.real_mask(lengths, 12)
    assert bool((signed[~real] == 0).all()) and bool((signed[real] != 0).any())
    torch.testing.assert_close(scores, token_scores(model, ids, lengths, "attention"))
