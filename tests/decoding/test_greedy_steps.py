"""`greedy_steps`: the greedy decoder one step at a time is the whole decoder, step by step."""

import math

import pytest
import torch

from attnkit.decoding import greedy_decode, greedy_steps, padded_sources

pytestmark = pytest.mark.usefixtures("one_thread")

MODELS = ["rnn", "transformer"]


@pytest.mark.parametrize("name", MODELS)
def test_steps_rebuild_what_greedy_decode_returns(name, trained_models, toy):
    model = trained_models[name].eval()
    src, src_len, _, _ = toy.batch(toy.pairs(8, 12, seed=31))
    whole = greedy_decode(model, src, src_len)
    tokens = [[] for _ in whole]
    rows = [[] for _ in whole]
    scores = [0.0] * len(whole)
    left = set(range(len(whole)))
    for step in greedy_steps(model, src, src_len):
        assert set(step.rows.tolist()) <= left       # a finished sentence never comes back
        for k, (b, tok, lp, done) in enumerate(zip(step.rows.tolist(), step.tokens,
                                                   step.log_probs, step.done, strict=True)):
            scores[b] += lp
            if tok != model.config.eos_id:
                tokens[b].append(tok)
                rows[b].append(step.weights[k, : int(src_len[b])])
            if done:
                left.discard(b)
    assert not left
    for b, hyp in enumerate(whole):
        assert tokens[b] == hyp.tokens
        assert math.isclose(scores[b], hyp.score, rel_tol=1e-5, abs_tol=1e-5)
        if hyp.tokens:
            torch.testing.assert_close(torch.stack(rows[b]), hyp.attention)


def test_a_sentence_at_its_length_limit_is_done_without_eos(trained_models, toy):
    model = trained_models["rnn"].eval()
    src, src_len = padded_sources([[4, 5, 6]], toy.PAD)
    steps = list(greedy_steps(model, src, src_len, max_len=2, max_len_offset=0))
    assert len(steps) <= 2 and steps[-1].done == [True]


def test_refuses_a_model_in_training_mode(trained_models, toy):
    model = trained_models["rnn"].train()
    src, src_len = padded_sources([[4, 5]], toy.PAD)
    try:
        with pytest.raises(ValueError, match="eval mode"):
            next(greedy_steps(model, src, src_len))
    finally:
        model.eval()


def test_steps_hold_no_grad_mode_between_yields(trained_models, toy):
    """Two generators advanced in turn (a server's streams) leave the caller's grad mode as
    it was: nothing is entered across a yield."""
    model = trained_models["transformer"].eval()
    src, src_len = padded_sources([[4, 5, 6], [7, 8]], toy.PAD)
    a, b = greedy_steps(model, src, src_len), greedy_steps(model, src, src_len)
    next(a)
    assert torch.is_grad_enabled()
    next(b)
    next(a, None)
    assert torch.is_grad_enabled()
