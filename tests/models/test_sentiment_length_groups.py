"""SentimentClassifier's fast masked forward: rows encoded in length groups, each cut to its
longest row. Checked against the full padded batch (outputs and every gradient) and against
each review run alone; plus the cached sinusoid table.

Tolerances: the models run in float32 (no autocast) on every CPU. The fast path and the
reference compute the same sums in another order and through other kernels (groups against
one padded batch, a gathered projection table against a matmul), and which kernel a matmul
takes depends on the CPU (oneDNN/MKL pick by ISA: AVX2, AVX512, AMX), but each accumulates in
float32. With inner dimensions of at most 64 and logits of order 1, the difference is a few
float32 ulps (about 1e-6), so ``1e-5`` holds on each CPU with room; gradients, sums over the
batch, get ``rtol=1e-4``. The checks in float64 (1e-12) compare the same float64 arithmetic
in another order: a difference there is a bug, not rounding.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.data import batching
from attnkit.models import sentiment
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
    x, mask, _ = model.encode(ids, lengths)
    return model.classifier(model.pool(x, mask)[0]).squeeze(-1)


def _force_groups(monkeypatch, groups: int) -> list[list[int]]:
    """Make every batch split into ``groups`` length groups (no fixed cost per group, so the
    planner cuts as often as allowed); returns the list the planned sizes are appended to."""
    monkeypatch.setattr(batching, "GROUP_COST", 0.0)
    monkeypatch.setattr(SentimentClassifier, "length_groups", groups)
    planned: list[list[int]] = []
    plan = sentiment.plan_length_groups
    monkeypatch.setattr(sentiment, "plan_length_groups",
                        lambda *a, **kw: planned.append(plan(*a, **kw)) or planned[-1])
    return planned


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("groups", [1, 3, 4])
def test_grouped_forward_matches_the_full_batch(padding, cfg, groups, monkeypatch):
    planned = _force_groups(monkeypatch, groups)
    torch.manual_seed(0)
    model = SentimentClassifier(_small(padding=padding, **cfg))
    ids, lengths = _batch(padding)
    fast = model(ids, lengths)
    assert len(planned[-1]) == groups
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
def test_grouped_forward_matches_each_review_alone(padding, monkeypatch):
    _force_groups(monkeypatch, 3)
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


@pytest.mark.parametrize("cfg", [dict(), dict(padding="post"), dict(mask_padding=False)])
def test_logits_by_length_equal_forward(cfg):
    torch.manual_seed(2)
    model = SentimentClassifier(_small(**cfg)).eval()
    ids, lengths = _batch(cfg.get("padding", "pre"), batch=45, seed=5)
    want = model(ids, lengths)
    for batch_size in (1, 7, 64):
        got = model.logits_by_length(ids, lengths, batch_size=batch_size)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.predict_proba(ids, lengths), torch.sigmoid(want),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="batch_size"):
        model.logits_by_length(ids, lengths, batch_size=0)
    with pytest.raises(ValueError, match="lengths must lie"):
        model.logits_by_length(ids, lengths + 30)


def test_keras2018_gradients_equal_the_dense_path_in_float64():
    """The full-size 2018 model: the fused attention + max pooling against autograd through the
    dense attention and `pool`. In float64, because in float32 a near tie between two query rows
    can go either way in either path and move a feature's whole gradient to the other row."""
    torch.manual_seed(0)
    model = SentimentClassifier(SentimentConfig.keras2018(dropout=0.0)).double()
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([100, 100, 37, 100, 3, 100, 81, 100])
    ids = torch.randint(1, 30000, (8, 100), generator=g)
    ids = ids.masked_fill(~model.real_mask(lengths, 100), 0)
    fast = model(ids, lengths)
    ref = _full_batch_logits(model, ids, lengths)
    torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12)
    params = [p for _, p in model.named_parameters()]
    for a, b in zip(torch.autograd.grad(fast.square().sum(), params),
                    torch.autograd.grad(ref.square().sum(), params), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def _spy(monkeypatch, cls, name: str) -> list:
    """Record the keyword arguments and result of every call of ``cls.name``."""
    calls: list = []
    inner = getattr(cls, name)

    def wrapped(self, *args, **kwargs):
        out = inner(self, *args, **kwargs)
        calls.append((kwargs, out))
        return out

    monkeypatch.setattr(cls, name, wrapped)
    return calls


def _with_full_rows(padding: str, seed: int, time: int = 24):
    """48 reviews: 24 shorter than ``time // 2`` (an empty one among them) and 24 that fill every
    slot, so that the longest length groups have no padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.cat([torch.randint(0, time // 2, (24,), generator=g), torch.full((24,), time)])
    lengths[0] = 0
    lengths = lengths[torch.randperm(48, generator=g)]
    ids = torch.randint(1, 50, (48, time), generator=g)
    real = torch.arange(time)[None, :] < lengths[:, None]
    if padding == "pre":
        real = real.flip(-1)
    return ids.masked_fill(~real, 0), lengths


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("cfg", CONFIGS)
def test_groups_without_padding_skip_the_mask_and_match_the_full_batch(padding, cfg,
                                                                     monkeypatch):
    _force_groups(monkeypatch, 3)
    encodes = _spy(monkeypatch, SentimentClassifier, "encode")
    torch.manual_seed(3)
    model = SentimentClassifier(_small(padding=padding, **cfg))
    ids, lengths = _with_full_rows(padding, seed=4)
    fast = model(ids, lengths)
    full = [kw["full"] for kw, _ in encodes]
    assert len(full) == 3 and not full[0] and full[-1]  # the longest group has no padding
    ref = _full_batch_logits(model, ids, lengths)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
    params = list(model.parameters())
    fast_grads = torch.autograd.grad(fast.square().sum(), params, allow_unused=True)
    ref_grads = torch.autograd.grad(ref.square().sum(), params, allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), fast_grads, ref_grads, strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("cfg", [dict(), dict(padding="post"), dict(mask_padding=False),
                                 dict(positional="learned"), dict(positional="none"),
                                 dict(attn_bias=True), dict(num_layers=2)])
@pytest.mark.parametrize("tables", [True, False])
def test_logits_by_length_with_and_without_projection_tables(cfg, tables, monkeypatch):
    monkeypatch.setattr(sentiment, "TABLE_TOKENS_PER_WORD", 0 if tables else 10 ** 9)
    built = _spy(monkeypatch, SentimentClassifier, "projection_tables")
    torch.manual_seed(5)
    model = SentimentClassifier(_small(**cfg)).eval()
    ids, lengths = _with_full_rows(cfg.get("padding", "pre"), seed=6)
    want = _full_batch_logits(model, ids, lengths)  # the whole padded batch, no tables
    for batch_size in (7, 64):
        got = model.logits_by_length(ids, lengths, batch_size=batch_size)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # the tables are made once a call, where the model allows them (one plain layer)
    assert len(built) == (2 if tables else 0)
    assert all((out is None) == (cfg.get("num_layers", 1) > 1) for _, out in built)
    with pytest.raises(IndexError, match="ids must lie in 0..49"):
        model.logits_by_length(ids.masked_fill(ids == 7, 50), lengths)


def test_projection_tables_hold_each_words_and_each_positions_projection():
    torch.manual_seed(7)
    model = SentimentClassifier(_small(attn_bias=True, block_dropout=0.1)).eval()
    with torch.no_grad():
        model.layers[0].in_proj_bias.normal_()
    words, positions = model.projection_tables(24)
    layer = model.layers[0]
    for word, pos in ((5, 3), (0, 0), (49, 23)):
        x = model.embedding.weight[word] + model.sinusoid.encoding(24)[pos]
        torch.testing.assert_close(words[word] + positions[pos],
                                   layer.in_proj_weight @ x + layer.in_proj_bias)
    # only where a token's projection is linear in its looked-up vector and its position's
    assert model.train().projection_tables(24) is None  # embedding dropout
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.eval().projection_tables(24) is None
    for cfg in (dict(num_layers=2), dict(bigram_buckets=7), dict(pooling="attention"),
                dict(attn_out_proj=True), dict(block="transformer")):
        assert SentimentClassifier(_small(**cfg)).eval().projection_tables(24) is None, cfg
