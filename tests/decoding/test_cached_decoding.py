"""Cached (incremental) decoding gives the uncached path's outputs; finished sentences leave the
batch; decode_many keeps the input order."""

import math

import pytest
import torch

from attnkit.decoding import (
    beam_search,
    decode_many,
    greedy_decode,
    length_batches,
    max_lengths,
    normalised_score,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

MODELS = ["rnn", "rnn-luong-lstm", "transformer"]


def _same(a, b, attention=True):
    assert [h.tokens for h in a] == [h.tokens for h in b]
    for x, y in zip(a, b, strict=True):
        assert x.ended == y.ended
        assert math.isclose(x.score, y.score, rel_tol=1e-4, abs_tol=1e-4)
        if attention:
            torch.testing.assert_close(x.attention, y.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("weights", [True, False])
def test_cached_equals_uncached(name, beam, weights, trained_models, toy):
    model = trained_models[name]
    src, src_len, _, _ = toy.batch(toy.pairs(24, 12, seed=31))
    if beam == 1:
        cached = greedy_decode(model, src, src_len, need_weights=weights)
        plain = greedy_decode(model, src, src_len, use_cache=False, need_weights=weights)
    else:
        cached = beam_search(model, src, src_len, beam_size=beam, need_weights=weights)
        plain = beam_search(model, src, src_len, beam_size=beam, use_cache=False,
                            need_weights=weights)
    _same(cached, plain, attention=weights)
    assert sum(h.ended for h in cached) > 0   # a trained model: real EOS decisions compared


def reference_beam(model, src, length, k, alpha, limit, eos, bos):
    """Beam search on one sentence as fairseq's algorithm states it, with Python lists, every
    hypothesis scored by the model's teacher-forced ``forward`` (no step API, no cache): the
    ``2k`` best extensions; among the first ``k``, one ending in EOS (or at the limit)
    finishes while fewer than ``k`` have; the first ``k`` others go on."""
    alive, finished = [([], 0.0)], []
    for t in range(limit):
        tgt_in = torch.tensor([[bos] + toks for toks, _ in alive])
        with torch.no_grad():
            logits = model(src.expand(len(alive), -1), length.expand(len(alive)), tgt_in)
        logp = torch.log_softmax(logits[:, -1].float(), -1)
        cands = sorted(((score + float(logp[i, w]), toks, w) for i, (toks, score)
                        in enumerate(alive) for w in range(logp.shape[1])),
                       key=lambda c: -c[0])[:2 * k]
        nxt = []
        for j, (score, toks, w) in enumerate(cands):
            if w == eos or t + 1 >= limit:
                if j < k and len(finished) < k:
                    ended = w == eos
                    norm = normalised_score(score, t + 1, alpha, "gnmt")
                    finished.append((norm, toks + ([] if ended else [w]), ended))
            elif len(nxt) < k:
                nxt.append((toks + [w], score))
        if len(finished) >= k or not nxt:
            break
        alive = nxt
    return max(finished, key=lambda f: f[0])


@pytest.mark.parametrize("name", ["rnn", "transformer", "untrained"])
@pytest.mark.parametrize("beam", [2, 4])
def test_beam_search_equals_the_algorithm_run_by_hand(name, beam, trained_models, toy):
    if name == "untrained":   # flat distributions: every choice of the search matters
        torch.manual_seed(5)
        from attnkit.models import TransformerConfig, TransformerSeq2Seq
        model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16,
                                                     heads=2, layers=1, ff_dim=32, dropout=0.0))
    else:
        model = trained_models[name]
    model.eval()
    src, src_len, _, _ = toy.batch(toy.pairs(12, 12, seed=37))
    limits = max_lengths(src_len, 1.0, 1, 200)
    hyps = beam_search(model, src, src_len, beam_size=beam, alpha=0.6, max_len_ratio=1.0,
                       max_len_offset=1, need_weights=False)
    for b, hyp in enumerate(hyps):
        n = int(src_len[b])
        want = reference_beam(model, src[b:b + 1, :n], src_len[b:b + 1], beam, 0.6, limits[b],
                              toy.EOS, toy.BOS)
        assert (hyp.tokens, hyp.ended) == (want[1], want[2])
        got = normalised_score(hyp.score, len(hyp.tokens) + hyp.ended, 0.6, "gnmt")
        assert math.isclose(got, want[0], rel_tol=1e-5, abs_tol=1e-5)


class _Recorder(torch.nn.Module):
    """The wrapped model, recording the rows of every step and the sentences it is given."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.sizes, self.sentences = model, model.config, [], []

    def encode(self, *args, **kwargs):
        return self.model.encode(*args, **kwargs)

    def step(self, tokens, state, **kwargs):
        self.sizes.append(tokens.shape[0])
        self.sentences.append(state.source.shape[0])
        return self.model.step(tokens, state, **kwargs)

    def reorder(self, state, rows, sentences):
        return self.model.reorder(state, rows, sentences)


@pytest.mark.parametrize("beam", [1, 3])
def test_finished_sentences_leave_the_batch(beam, trained_models, toy):
    rec = _Recorder(trained_models["transformer"])
    # One short source (short limit) with long ones: it is cut at its limit early.
    src, src_len, _, _ = toy.batch(toy.pairs(4, 12, seed=33, min_len=6, max_len=6))
    src_len = torch.tensor([1, 6, 6, 6])
    hyps = (greedy_decode(rec, src, src_len, max_len_offset=0) if beam == 1 else
            beam_search(rec, src, src_len, beam_size=beam, max_len_offset=0))
    assert len(hyps[0].tokens) <= 2
    assert rec.sizes[0] == 4 * beam and rec.sentences[0] == 4
    assert min(rec.sizes) <= 3 * beam   # the short sentence's rows were dropped...
    assert min(rec.sentences) <= 3     # ...and its encoder output, held once per sentence
    assert rec.sizes == sorted(rec.sizes, reverse=True)
    assert [r // beam for r in rec.sizes] == rec.sentences


def test_length_batches_group_by_length_and_respect_the_budget():
    lengths = [5, 1, 9, 2, 9, 1, 3]
    batches = length_batches(lengths, batch_size=None, max_tokens=20, beam=2)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)
    for b in batches:
        assert len(b) == 1 or len(b) * 2 * max(lengths[i] for i in b) <= 20
    assert [len(b) for b in length_batches(lengths, batch_size=3)] == [3, 3, 1]
    with pytest.raises(ValueError, match="batch_size, max_tokens"):
        length_batches(lengths, batch_size=None)


@pytest.mark.parametrize("beam", [1, 3])
def test_decode_many_keeps_order_and_equals_one_batch(beam, trained_models, toy):
    model = trained_models["transformer"]
    pairs = toy.pairs(10, 12, seed=34)
    ids = [s for s, _ in pairs]
    many = decode_many(model, ids, beam=beam, max_tokens=3 * 6 * beam, need_weights=False)
    for i, s in enumerate(ids):
        one = decode_many(model, [s], beam=beam, need_weights=False)
        _same([many[i]], one, attention=False)


@pytest.mark.parametrize("beam", [1, 5])
def test_decode_many_batches_by_tokens_by_default(beam, trained_models, toy, monkeypatch):
    """300 sources of 1-8 tokens fit in one or two batches of DECODE_MAX_TOKENS rows, far
    more than 64 sentences each; the outputs equal sentence-by-sentence decoding."""
    import attnkit.decoding.batched as batched

    model = trained_models["transformer"]
    ids = [s for s, _ in toy.pairs(300, 12, seed=36, min_len=1, max_len=8)]
    sizes = []
    search = batched.beam_search if beam > 1 else batched.greedy_decode

    def counting(model, src, src_len, **kw):
        sizes.append(src.shape[0])
        return search(model, src, src_len, **kw)
    monkeypatch.setattr(batched, "beam_search" if beam > 1 else "greedy_decode", counting)
    many = decode_many(model, ids, beam=beam, need_weights=False)
    assert sum(sizes) == 300 and len(sizes) <= 2 and min(sizes) > 64
    for i in range(0, 300, 37):
        _same([many[i]], decode_many(model, [ids[i]], beam=beam, need_weights=False),
              attention=False)


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("use_cache", [True, False])
def test_weights_of_every_layer_and_head(beam, use_cache, toy):
    torch.manual_seed(0)
    from attnkit.models import TransformerConfig, TransformerSeq2Seq

    model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16, heads=2,
                                                 layers=3, ff_dim=32, dropout=0.0)).eval()
    ids = [s for s, _ in toy.pairs(6, 12, seed=35)]
    last = decode_many(model, ids, beam=beam, use_cache=use_cache, max_len=8)
    every = decode_many(model, ids, beam=beam, use_cache=use_cache, max_len=8,
                        need_weights="all")
    _same(last, every, attention=False)
    for h, a, s in zip(last, every, ids, strict=True):
        assert a.attention.shape == (len(h.tokens), 3, 2, len(s))   # [T, layers, heads, S]
        torch.testing.assert_close(a.attention[:, -1].mean(1), h.attention, atol=1e-6,
                                   rtol=1e-5)
    assert any(len(h.tokens) > 1 for h in last)

