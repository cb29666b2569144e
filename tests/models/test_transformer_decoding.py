"""The Transformer's incremental decoding (the step API of models/transformer.py) against its
reference path, which feeds the whole prefix through every layer at every step."""

import pytest
import torch

from attnkit.attention import dot_product

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

VOCAB = 12  # the vocabulary of the conftest's tiny_transformer


def _no_explicit_softmax(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("explicit attention weights computed: the fused path was left")

    monkeypatch.setattr(dot_product, "masked_softmax", refuse)  # every explicit path


def encode(model, src, src_len, use_cache=True, beams=1, weights="none"):
    return model.encode(src, src_len, beams=beams, use_cache=use_cache, weights=weights)


def feed(model, tokens, state, weights="last"):
    return model.step(tokens, state, weights=weights, logits=True)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_cached_steps_equal_reference_steps(tiny_transformer, positional, toy):
    model = tiny_transformer(positional=positional)
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(4, VOCAB, seed=3))
    cached, plain = encode(model, src, src_len), encode(model, src, src_len, use_cache=False)
    assert len(cached.caches) == 2 and plain.caches is None and plain.prefix is not None
    with torch.inference_mode():
        for t in range(tgt_in.shape[1]):
            a, b = feed(model, tgt_in[:, t:t + 1], cached), feed(model, tgt_in[:, t:t + 1], plain)
            cached, plain = a.state, b.state
            torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(a.weights, b.weights, atol=1e-6, rtol=1e-5)
    # One key/value row per fed position; the source projected once, [batch, heads, S, hd].
    assert cached.caches[0].length == tgt_in.shape[1] == cached.length
    assert cached.caches[0].keys.filled().shape == (4, 4, tgt_in.shape[1], 8)
    assert cached.sources[1].values.shape == (4, 4, src.shape[1], 8)


def test_the_cache_is_written_in_place(tiny_transformer, toy):
    """No copy of the history per step: the buffer stays the same storage until it is full,
    then it doubles."""
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(2, VOCAB, seed=3))
    state = encode(model, src, src_len)
    cache = state.caches[0]
    capacity, storage = cache.keys.capacity, cache.keys.data.data_ptr()
    assert capacity == 2 * src.shape[1] + 8
    token = tgt_in[:, :1]
    with torch.inference_mode():
        for _ in range(capacity):
            state = feed(model, token, state, weights="none").state
            assert cache.keys.data.data_ptr() == storage
        state = feed(model, token, state, weights="none").state
    assert cache.keys.capacity == 2 * capacity and cache.length == capacity + 1


def test_the_whole_target_at_once_equals_one_token_at_a_time(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=7))
    with torch.inference_mode():
        whole = feed(model, tgt_in, encode(model, src, src_len), weights="all")
        state, rows = encode(model, src, src_len), []
        for t in range(tgt_in.shape[1]):
            out = feed(model, tgt_in[:, t:t + 1], state, weights="all")
            state = out.state
            rows.append(out)
    torch.testing.assert_close(whole.logits, torch.cat([r.logits for r in rows], 1),
                               atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(whole.weights, torch.cat([r.weights for r in rows], 1),
                               atol=1e-6, rtol=1e-5)
    assert whole.weights.shape == (3, tgt_in.shape[1], 2, 4, src.shape[1])
    assert len(whole.hidden) == 2 and whole.hidden[0].shape == (3, tgt_in.shape[1], 32)


def test_reordered_rows_follow_their_history(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=4))
    with torch.inference_mode():
        state = feed(model, tgt_in.repeat_interleave(2, 0)[:, :1],
                     encode(model, src, src_len, beams=2)).state
        # Rows 2b, 2b+1 belong to sentence b; rows 0,0 | 2,3 | 5,4 go on.
        rows = torch.tensor([0, 0, 2, 3, 5, 4])
        moved = model.reorder(state, rows, None)
        got = feed(model, tgt_in.repeat_interleave(2, 0)[rows, 1:2], moved)
        alone = feed(model, tgt_in[:, :1], encode(model, src, src_len)).state
        want = feed(model, tgt_in[:, 1:2], alone)
    torch.testing.assert_close(got.logits, want.logits.repeat_interleave(2, 0),
                               atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got.weights, want.weights.repeat_interleave(2, 0),
                               atol=1e-6, rtol=1e-5)


def test_finished_sentences_leave_the_state(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=8))
    with torch.inference_mode():
        state = feed(model, tgt_in.repeat_interleave(2, 0)[:, :1],
                     encode(model, src, src_len, beams=2)).state
        kept = model.reorder(state, torch.tensor([4, 5, 0, 1]), torch.tensor([2, 0]))
        got = feed(model, tgt_in[[2, 2, 0, 0], 1:2], kept)
        alone = feed(model, tgt_in[:, :1], encode(model, src, src_len)).state
        want = feed(model, tgt_in[:, 1:2], alone)
    assert kept.source.shape[0] == 2 and kept.sources[0].keys.shape[0] == 2
    assert kept.caches[0].keys.filled().shape[0] == 4
    torch.testing.assert_close(got.logits, want.logits[[2, 2, 0, 0]], atol=1e-5,
                               rtol=1e-4)


def test_decoding_runs_the_fused_path_unless_weights_are_asked(tiny_transformer, toy,
                                                                monkeypatch):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB, seed=5))
    with torch.inference_mode():
        want = feed(model, tgt_in[:, :1], encode(model, src, src_len)).logits
    _no_explicit_softmax(monkeypatch)
    model.train()
    model(src, src_len, tgt_in).sum().backward()  # training forward: no weights asked
    model.eval()
    with torch.inference_mode():
        for use_cache in (True, False):
            out = feed(model, tgt_in[:, :1], encode(model, src, src_len, use_cache),
                       weights="none")
            assert out.weights is None
            torch.testing.assert_close(out.logits, want, atol=1e-5, rtol=1e-4)
        with pytest.raises(AssertionError, match="fused path was left"):
            feed(model, tgt_in[:, :1], encode(model, src, src_len), weights="last")


def test_bad_options_are_refused(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(2, VOCAB, seed=5))
    with pytest.raises(ValueError, match="weights must be one of none, last, all"):
        model.encode(src, src_len, beams=1, use_cache=True, weights=True)
    with pytest.raises(ValueError, match="weights must be one of"):
        feed(model, tgt_in[:, :1], encode(model, src, src_len), weights="some")
    with pytest.raises(ValueError, match=r"tokens must be \[rows, t\]"):
        feed(model, tgt_in[:, 0], encode(model, src, src_len))


def test_learned_positions_past_max_len_name_the_limit(tiny_transformer, toy):
    model = tiny_transformer(positional="learned", max_len=4)
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(2, VOCAB, seed=5, min_len=2, max_len=2))
    state = encode(model, src, src_len)
    with torch.inference_mode():
        state = feed(model, tgt_in[:, :1].repeat(1, 4), state, weights="none").state
        with pytest.raises(ValueError, match="max_len=4"):
            feed(model, tgt_in[:, :1], state, weights="none")
