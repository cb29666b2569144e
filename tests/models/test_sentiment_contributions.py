"""SentimentClassifier.attribute: signed per-token contributions that add up to the logit."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.classification_text import pad_sequences
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", [
    dict(),  # the 2018 layer, max pooling
    dict(block="transformer", num_layers=2, pooling="attention", attn_bias=True,
         attn_out_proj=True, ffn_dim=32),
    dict(block="transformer", pooling="max", attn_out_proj=True, ffn_dim=32),
])
def test_contributions_sum_to_the_logit_and_scores_match_explain(padding, cfg):
    torch.manual_seed(0)
    model = SentimentClassifier(SentimentConfig.keras2018(
        vocab_size=50, embed_dim=16, num_heads=2, head_dim=8, maxlen=12, padding=padding,
        **cfg)).eval()
    ids, lengths = pad_sequences([[5, 6, 7, 8, 9], [10, 11], list(range(20, 32))], 12,
                                 padding=padding)
    prob, scores, signed = model.attribute(ids, lengths)
    logit = model(ids, lengths)
    assert torch.allclose(signed.sum(-1), logit - model.classifier.bias, atol=1e-5)
    assert torch.allclose(prob, torch.sigmoid(logit), atol=1e-6)
    real = model.real_mask(lengths, 12)
    assert bool((signed[~real] == 0).all()) and bool((signed[real] != 0).any())
    explained = model.explain(ids, lengths)
    assert torch.equal(explained[0], prob) and torch.equal(explained[1], scores)
