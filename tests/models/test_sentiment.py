"""SentimentClassifier: the 2018 shapes and parameter count, masking on both padding sides,
and learning a small synthetic sentiment task (its explanation finding the sentiment word)."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.classification_text import pad_sequences
from attnkit.explain.sentiment import attribute
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig, count_parameters


def _batch(padding: str, maxlen: int = 12, extra_pad: int = 0):
    seqs = [[5, 6, 7, 8, 9], [10, 11], list(range(20, 20 + maxlen))]
    ids, lengths = pad_sequences(seqs, maxlen + extra_pad, padding=padding, truncating="post")
    return ids, lengths


def _small(**kw) -> SentimentConfig:
    return SentimentConfig.keras2018(vocab_size=50, embed_dim=16, num_heads=2, head_dim=8,
                                     maxlen=32, **kw)


def test_keras2018_parameter_count_and_shapes():
    model = SentimentClassifier(SentimentConfig.keras2018())
    # Keras: Embedding 30000*128 + attention 3*128*128 (no bias) + Dense 128+1.
    assert count_parameters(model) == 3_889_281 == 30000 * 128 + 3 * 128 * 128 + 129
    ids = torch.randint(1, 30000, (4, 100))
    out = model(ids, torch.tensor([100, 50, 1, 7]))
    assert out.shape == (4,)


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", [
    dict(),
    dict(block="transformer", num_layers=2, pooling="attention", attn_bias=True,
         attn_out_proj=True, bigram_buckets=97, ffn_dim=32),
    dict(positional="learned", num_layers=2),
])
def test_padding_does_not_change_the_output(padding, cfg):
    torch.manual_seed(0)
    model = SentimentClassifier(_small(padding=padding, **cfg)).eval()
    ids, lengths = _batch(padding)
    ref = model(ids, lengths)
    # 1) other ids in the padded slots
    noisy = ids.clone()
    pad = ~model.real_mask(lengths, ids.shape[1])
    noisy[pad] = torch.randint(1, 50, (int(pad.sum()),))
    torch.testing.assert_close(model(noisy, lengths), ref)
    # 2) more padding on the same side
    longer, lengths2 = _batch(padding, extra_pad=5)
    torch.testing.assert_close(model(longer, lengths2), ref)
    # 3) each review alone, without any padding
    for b in range(ids.shape[0]):
        n = int(lengths[b])
        real = ids[b, ids.shape[1] - n:] if padding == "pre" else ids[b, :n]
        torch.testing.assert_close(model(real[None], lengths[b:b + 1]), ref[b:b + 1])


def test_pre_padding_mask_marks_the_last_tokens():
    model = SentimentClassifier(_small(padding="pre"))
    mask = model.real_mask(torch.tensor([2, 0]), 4)
    assert mask.tolist() == [[False, False, True, True], [False] * 4]
    post = SentimentClassifier(_small(padding="post"))
    assert post.real_mask(torch.tensor([2]), 4).tolist() == [[True, True, False, False]]


def test_unmasked_2018_mode_sees_the_padding():
    torch.manual_seed(0)
    model = SentimentClassifier(_small(mask_padding=False)).eval()
    ids, lengths = _batch("pre")
    longer, lengths2 = _batch("pre", extra_pad=5)
    assert not torch.allclose(model(longer, lengths2), model(ids, lengths))


def test_bad_inputs():
    model = SentimentClassifier(_small())
    with pytest.raises(ValueError, match="lengths"):
        model(torch.zeros(2, 5, dtype=torch.long), torch.tensor([6, 1]))
    with pytest.raises(ValueError, match="batch, time"):
        model(torch.zeros(5, dtype=torch.long), torch.tensor([5]))
    with pytest.raises(ValueError, match="pooling"):
        SentimentClassifier(_small(pooling="mean"))


def _synthetic(n: int, gen: torch.Generator, maxlen: int = 20):
    """Label = whether the one sentiment word (ids 2-5 positive, 6-9 negative) is positive."""
    seqs, labels = [], []
    for _ in range(n):
        length = int(torch.randint(3, maxlen + 1, (1,), generator=gen))
        seq = torch.randint(10, 50, (length,), generator=gen)
        y = int(torch.randint(0, 2, (1,), generator=gen))
        word = int(torch.randint(2, 6, (1,), generator=gen)) + (0 if y else 4)
        seq[int(torch.randint(0, length, (1,), generator=gen))] = word
        seqs.append(seq.tolist())
        labels.append(float(y))
    ids, lengths = pad_sequences(seqs, maxlen)
    return ids, lengths, torch.tensor(labels)


def test_learns_a_synthetic_sentiment_task():
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    ids, lengths, y = _synthetic(1024, gen)
    test_ids, test_lengths, test_y = _synthetic(256, gen)
    model = SentimentClassifier(_small(dropout=0.1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(8):
        for s in range(0, 1024, 64):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(ids[s:s + 64], lengths[s:s + 64]), y[s:s + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    acc = ((model(test_ids, test_lengths) > 0).float() == test_y).float().mean()
    assert acc > 0.95
    # the explanation's top token is the sentiment word far more often than chance (~1/11)
    _, scores, _ = attribute(model, test_ids, test_lengths)
    top = test_ids.gather(1, scores.argmax(-1, keepdim=True)).squeeze(1)
    assert ((top >= 2) & (top <= 9)).float().mean() > 0.5


def test_embedding_lookup_equals_f_embedding_and_its_gradient():
    from attnkit.models.sentiment import embedding_lookup

    torch.manual_seed(0)
    weight = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([[0, 3, 3, 6], [6, 6, 1, 0]])  # repeats: gradients add up
    out = embedding_lookup(ids, weight)
    ref = torch.nn.functional.embedding(ids, weight)
    assert torch.equal(out, ref)
    g = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, weight, g)
    (want,) = torch.autograd.grad(ref, weight, g)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda w: embedding_lookup(ids, w), (weight,))
    with pytest.raises(IndexError, match="0..6"):
        embedding_lookup(torch.tensor([7]), weight)
