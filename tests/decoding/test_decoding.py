import itertools
import math

import pytest
import torch

from attnkit.decoding import (
    beam_search,
    greedy_decode,
    max_lengths,
    normalised_score,
    replace_unk,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

MODELS = ["rnn", "rnn-luong-lstm", "transformer"]


def _same(a, b):
    assert [h.tokens for h in a] == [h.tokens for h in b]
    for x, y in zip(a, b, strict=True):
        assert x.ended == y.ended
        assert math.isclose(x.score, y.score, rel_tol=1e-4, abs_tol=1e-4)
        torch.testing.assert_close(x.attention, y.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_beam_one_equals_greedy(name, trained_models, toy):
    model = trained_models[name]
    src, src_len, _, _ = toy.batch(toy.pairs(16, 12, seed=21))
    _same(beam_search(model, src, src_len, beam_size=1), greedy_decode(model, src, src_len))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("beam", [1, 3])
def test_batch_equals_one_by_one(name, beam, trained_models, toy):
    model = trained_models[name]
    pairs = toy.pairs(6, 12, seed=22)
    src, src_len, _, _ = toy.batch(pairs)
    batched = beam_search(model, src, src_len, beam_size=beam)
    for i, pair in enumerate(pairs):
        s, sl, _, _ = toy.batch([pair])
        _same([batched[i]], beam_search(model, s, sl, beam_size=beam))


@pytest.mark.parametrize("name", MODELS)
def test_attention_rows_cover_real_source_only(name, trained_models, toy):
    model = trained_models[name]
    src, src_len, _, _ = toy.batch(toy.pairs(8, 12, seed=23))
    for hyps in (greedy_decode(model, src, src_len),
                 beam_search(model, src, src_len, beam_size=3)):
        for h, n in zip(hyps, src_len.tolist(), strict=True):
            assert h.attention.shape == (len(h.tokens), n)   # no padding columns
            torch.testing.assert_close(h.attention.sum(-1), torch.ones(len(h.tokens)))


def test_beam_search_is_exact_when_the_beam_holds_everything(trained_models, toy):
    """With a beam as wide as the whole search space, beam search must return the best
    normalised sequence among all outputs of at most 3 tokens, found here by enumeration."""
    model = trained_models["rnn"].eval()
    src, src_len, _, _ = toy.batch(toy.pairs(1, 12, seed=24))
    vocab, limit, alpha = 12, 3, 0.6
    words = [w for w in range(vocab) if w != toy.EOS]
    candidates = []   # (tokens incl. final EOS if any)
    for n in range(limit):   # n words then EOS
        candidates += [list(p) + [toy.EOS] for p in itertools.product(words, repeat=n)]
    candidates += [list(p) for p in itertools.product(words, repeat=limit)]  # cut at the limit
    tgt_in = torch.tensor([[toy.BOS] + (c + [toy.PAD] * limit)[: limit - 1] for c in candidates])
    with torch.no_grad():
        logp = torch.log_softmax(model(src.expand(len(candidates), -1),
                                       src_len.expand(len(candidates)), tgt_in), -1)
    best, best_seq = -math.inf, None
    for i, c in enumerate(candidates):
        score = sum(logp[i, t, tok].item() for t, tok in enumerate(c))
        norm = normalised_score(score, len(c), alpha, "gnmt")
        if norm > best:
            best, best_seq = norm, c
    hyp = beam_search(model, src, src_len, beam_size=len(candidates), alpha=alpha,
                      max_len=limit)[0]
    expected = best_seq[:-1] if best_seq[-1] == toy.EOS else best_seq
    assert hyp.tokens == expected
    assert hyp.ended == (best_seq[-1] == toy.EOS)


def test_length_limit_and_eval_mode(trained_models, toy):
    model = trained_models["rnn"]
    model.train()
    src, src_len, _, _ = toy.batch(toy.pairs(4, 12, seed=25))
    hyps = greedy_decode(model, src, src_len, max_len=2)
    assert model.training                       # mode restored
    assert all(len(h.tokens) <= 2 for h in hyps)
    assert all(h.ended or len(h.tokens) == 2 for h in hyps)
    assert not hyps[0].attention.requires_grad
    for h in beam_search(model, src, src_len, beam_size=2, max_len=2):
        assert len(h.tokens) <= 2
    assert max_lengths(torch.tensor([4, 10]), 1.5, 2, None) == [8, 17]
    assert max_lengths(torch.tensor([4, 10]), 1.5, 2, 10) == [8, 10]


def test_length_penalty_formulas():
    assert normalised_score(-6.0, 7, 1.0, "gnmt") == pytest.approx(-6.0 / 2.0)
    assert normalised_score(-6.0, 3, 1.0, "simple") == pytest.approx(-2.0)
    assert normalised_score(-6.0, 3, 0.0, "gnmt") == -6.0
    with pytest.raises(ValueError, match="length_norm"):
        normalised_score(-1.0, 1, 1.0, "weird")


def test_replace_unk_uses_most_attended_source_word():
    attention = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.2, 0.7], [0.5, 0.4, 0.1]])
    out = replace_unk(["je", "<unk>", "<unk>"], attention, ["I", "am", "Zorblax"])
    assert out == ["je", "Zorblax", "I"]
    assert replace_unk(["a", "<unk>"], None, ["x"]) == ["a", "<unk>"]
    with pytest.raises(ValueError, match=r"\[2, S\]"):
        replace_unk(["a", "<unk>"], torch.ones(1, 3), ["x", "y", "z"])
