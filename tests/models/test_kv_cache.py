"""The Transformer's incremental decoding (models/kv_cache.py) against the uncached path."""

import pytest
import torch

from attnkit.attention import multi_head
from attnkit.models import kv_cache

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

VOCAB = 12  # the vocabulary of the conftest's tiny_transformer



def _no_explicit_softmax(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("explicit attention weights computed: the fused path was left")

    monkeypatch.setattr(multi_head, "masked_softmax", refuse)
    monkeypatch.setattr(kv_cache, "masked_softmax", refuse)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_cached_steps_equal_uncached_steps(tiny_transformer, positional, toy):
    model = tiny_transformer(positional=positional)
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(4, VOCAB, seed=3))
    cached, plain = model.encode(src, src_len), model.encode(src, src_len, use_cache=False)
    assert cached.cache is not None and len(cached.cache) == 2 and plain.cache is None
    with torch.no_grad():
        for t in range(tgt_in.shape[1]):
            a, cached, wa = model.decode_step(tgt_in[:, t], cached)
            b, plain, wb = model.decode_step(tgt_in[:, t], plain)
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(wa, wb, atol=1e-6, rtol=1e-5)
    # One key/value row per fed position; the source projected once, [batch, heads, S, hd].
    assert cached.cache[0].self_keys.shape == (4, 4, tgt_in.shape[1], 8)
    assert cached.cache[1].cross_values.shape == (4, 4, src.shape[1], 8)


def test_reordered_cache_follows_its_rows(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=4))
    state = model.encode(src, src_len)
    with torch.no_grad():
        _, state, _ = model.decode_step(tgt_in[:, 0], state)
        index = torch.tensor([2, 0, 0])
        moved = model.reorder_state(state, index)
        got, _, _ = model.decode_step(tgt_in[index, 1], moved)
        want, _, _ = model.decode_step(tgt_in[:, 1], state)
    torch.testing.assert_close(got, want[index], atol=1e-5, rtol=1e-4)


def test_training_and_plain_decoding_run_the_fused_path(tiny_transformer, toy, monkeypatch):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=5))
    with torch.no_grad():
        want = [model.decode_step(tgt_in[:, 0], model.encode(src, src_len))[0]]
    _no_explicit_softmax(monkeypatch)
    model.train()
    model(src, src_len, tgt_in).sum().backward()  # training forward: no weights asked
    model.eval()
    with torch.no_grad():
        for use_cache in (True, False):
            state = model.encode(src, src_len, use_cache=use_cache)
            logp, _, w = model.decode_step(tgt_in[:, 0], state, need_weights=False)
            assert w is None
            torch.testing.assert_close(logp, want[0], atol=1e-5, rtol=1e-4)


def test_weights_are_computed_when_asked(tiny_transformer, toy, monkeypatch):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=6))
    _no_explicit_softmax(monkeypatch)
    with torch.no_grad(), pytest.raises(AssertionError, match="fused path was left"):
        model.decode_step(tgt_in[:, 0], model.encode(src, src_len), need_weights=True)
