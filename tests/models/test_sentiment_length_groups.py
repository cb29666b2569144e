"""SentimentClassifier's fast masked forward: rows encoded in length groups, each cut to its
longest row. Checked against the full padded batch (outputs and every gradient) and against
each review run alone; plus the cached sinusoid table."""

from __future__ import annotations

import pytest
import torch

from attnkit.models.sentiment import SentimentClassifier, SentimentConfig

CONFIGS = [
    dict(),
    dict(block="transformer", num_layers=2, pooling="attention", attn_bias=True,
         attn_out_proj=True, bigram_buckets=97, ffn_dim=32),
    dict(positional="learned", num_layers=2, bigram_buckets=31),
]


def _small(**kw) -> SentimentConfig:
    return SentimentConfig.keras2018(vocab_size=50, embed_dim=16, num_heads=2, head_dim=8,
                                     maxlen=24, dropout=0.0, **kw)


def _batch(padding: str, batch: int = 37, time: int = 24, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, time + 1, (batch,), generator=g)
    lengths[:3] = torch.tensor([0, time, 1])  # an empty review, a full one, a single token
    ids = torch.randint(1, 50, (batch, time), generator=g)
    real = torch.arange(time)[None, :] < lengths[:, None]
    if padding == "pre":
        real = real.flip(-1)
    return ids.masked_fill(~real, 0), lengths


def _full_batch_logits(model: SentimentClassifier, ids, lengths):
    """The plain path: the whole padded batch at once (what forward did before grouping)."""
    x, mask, _ = model._encode(ids, lengths)
    return model.classifier(model._pool(x, mask)[0]).squeeze(-1)


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("groups", [1, 3, 4])
def test_grouped_forward_matches_the_full_batch(padding, cfg, groups, monkeypatch):
    monkeypatch.setattr(SentimentClassifier, "length_groups", groups)
    torch.manual_seed(0)
    model = SentimentClassifier(_small(padding=padding, **cfg))
    ids, lengths = _batch(padding)
    fast = model(ids, lengths)
    fast_grads = torch.autograd.grad(fast.square().sum(), list(model.parameters()),
                                     allow_unused=True)
    ref = _full_batch_logits(model, ids, lengths)
    ref_grads = torch.autograd.grad(ref.square().sum(), list(model.parameters()),
                                    allow_unused=True)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
    for (name, _), a, b in zip(model.named_parameters(), fast_grads, ref_grads, strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("padding", ["pre", "post"])
def test_grouped_forward_matches_each_review_alone(padding):
    torch.manual_seed(1)
    model = SentimentClassifier(_small(padding=padding)).eval()
    ids, lengths = _batch(padding, batch=20, seed=3)
    out = model(ids, lengths)
    for b in range(ids.shape[0]):
        n = max(int(lengths[b]), 1)  # an empty review keeps one padding slot
        one = ids[b, ids.shape[1] - n:] if padding == "pre" else ids[b, :n]
        alone = _full_batch_logits(model, one[None], lengths[b:b + 1])
        torch.testing.assert_close(out[b:b + 1], alone, rtol=1e-5, atol=1e-5)


def test_grouped_forward_still_rejects_bad_lengths():
    model = SentimentClassifier(_small())
    ids, lengths = _batch("pre")
    with pytest.raises(ValueError, match="lengths must lie in 0..24"):
        model(ids, lengths + 1)
    with pytest.raises(ValueError, match="ids must be"):
        model(ids, lengths[:-1])


def test_sinusoid_table_is_cached_not_saved_and_grows():
    model = SentimentClassifier(_small())
    assert "pos_table" not in model.state_dict()
    expected = model.sinusoid.encoding(24)
    torch.testing.assert_close(model.pos_table, expected, rtol=0, atol=0)
    ids = torch.randint(1, 50, (2, 40))
    model.eval()(ids, torch.tensor([40, 30]))  # longer than maxlen: the table grows
    torch.testing.assert_close(model.pos_table, model.sinusoid.encoding(40), rtol=0, atol=0)
