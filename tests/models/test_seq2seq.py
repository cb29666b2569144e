import json

import pytest
import torch

from attnkit.decoding import greedy_decode
from attnkit.models import RNNSeq2Seq, RNNSeq2SeqConfig, build_model, config_from_dict
from attnkit.models.losses import masked_cross_entropy

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

VOCAB = 12
# (attention, style, cell, bidirectional): every decoder path at least once.
VARIANTS = [
    ("additive", "bahdanau", "gru", True),
    ("general", "luong", "lstm", True),
    ("dot", "luong", "gru", True),        # 2H encoder vs H decoder: keys are projected
    ("concat", "bahdanau", "lstm", False),
    ("scaled_dot", "bahdanau", "gru", False),
    ("local-m", "luong", "gru", True),
    ("local-p", "luong", "gru", True),
    ("none", "bahdanau", "gru", True),
    ("none", "luong", "lstm", False),
]


def make(attention="additive", style="bahdanau", cell="gru", bidirectional=True, **kw):
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(src_vocab=VOCAB, tgt_vocab=VOCAB, emb_dim=16, hidden=24, layers=2,
                           cell=cell, bidirectional=bidirectional, dropout=0.0,
                           attention=attention, style=style, **{"window": 2, **kw})
    return RNNSeq2Seq(cfg)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v)))
def test_forward_equals_step_api(variant, toy):
    model = make(*variant).eval()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(4, VOCAB))
    logits, attn = model(src, src_len, tgt_in, need_weights=True)
    assert logits.shape == (4, tgt_in.shape[1], VOCAB)
    state = model.encode(src, src_len, beams=1, use_cache=True, weights="none")
    for t in range(tgt_in.shape[1]):
        out = model.step(tgt_in[:, t:t + 1], state, weights="last", logits=True)
        state = out.state
        torch.testing.assert_close(out.logits[:, 0], logits[:, t])
        if attn is None:
            assert out.weights is None
        else:
            torch.testing.assert_close(out.weights[:, 0], attn[:, t])
    whole = model.step(tgt_in, model.encode(src, src_len, beams=1, use_cache=True,
                                            weights="none"), weights="all", logits=True)
    torch.testing.assert_close(whole.logits, logits)
    if attn is not None:   # the one attention, as one layer of one head
        torch.testing.assert_close(whole.weights, attn[:, :, None, None])
    if variant[0] == "none":
        assert attn is None
    else:
        # rows sum to 1 over the real source tokens and are exactly 0 on padding
        assert attn.shape == (4, tgt_in.shape[1], src.shape[1])
        real = torch.arange(src.shape[1])[None, :] < src_len[:, None]
        if variant[0].startswith("local"):
            # Luong's local weights are Gaussian-damped, not renormalised: rows sum to <= 1
            assert (attn.sum(-1) <= 1 + 1e-6).all()
        else:
            torch.testing.assert_close(attn.sum(-1), torch.ones(4, tgt_in.shape[1]))
        assert (attn.masked_select(~real[:, None, :].expand_as(attn)) == 0).all()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v)))
def test_padding_and_batch_do_not_change_a_sentence(variant, toy):
    model = make(*variant).eval()
    pairs = toy.pairs(5, VOCAB, seed=3)
    src, src_len, tgt_in, _ = toy.batch(pairs)
    batched = model(src, src_len, tgt_in)
    for i in range(5):
        s, sl, ti, _ = toy.batch([pairs[i]])
        alone = model(s, sl, ti)
        n = ti.shape[1]
        torch.testing.assert_close(alone[0], batched[i, :n], atol=1e-5, rtol=1e-4)


def test_config_json_round_trip_rebuilds_same_model(toy):
    model = make("general", "luong", "lstm")
    data = json.loads(json.dumps(model.config.to_dict()))
    again = build_model(data)
    again.load_state_dict(model.state_dict())
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    torch.testing.assert_close(model.eval()(src, src_len, tgt_in),
                               again.eval()(src, src_len, tgt_in))
    assert config_from_dict(data) == model.config
    with pytest.raises(ValueError, match="unknown"):
        config_from_dict({**data, "colour": "red"})
    with pytest.raises(ValueError, match="attention must be one of"):
        RNNSeq2SeqConfig(src_vocab=5, tgt_vocab=5, attention="telepathy")


def test_bad_shapes_raise_value_error(toy):
    model = make()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(2, VOCAB))
    with pytest.raises(ValueError, match="src_lengths must lie in"):
        model(src, src_len + 10, tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must have shape \[2, T\]"):
        model(src, src_len, tgt_in[0])


def test_teacher_forcing_ratio_feeds_own_predictions(toy):
    pairs = toy.pairs(6, VOCAB, seed=5)
    src, src_len, tgt_in, _ = toy.batch(pairs)
    full = make(teacher_forcing_ratio=1.0).train()
    none = make(teacher_forcing_ratio=0.0).train()  # same seed: same weights
    a, b = full(src, src_len, tgt_in), none(src, src_len, tgt_in)
    torch.testing.assert_close(a[:, 0], b[:, 0])      # step 0 always gets BOS
    # with ratio 0 the gold tokens are ignored: corrupting them changes nothing
    corrupted = tgt_in.clone()
    corrupted[:, 1:] = 5
    torch.testing.assert_close(none(src, src_len, corrupted), b)
    assert not torch.allclose(full(src, src_len, corrupted), a)


def _overfit(model, pairs, toy, steps=150, lr=1e-2):
    src, src_len, tgt_in, tgt_out = toy.batch(pairs)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss, _ = masked_cross_entropy(model(src, src_len, tgt_in), tgt_out, pad_id=toy.PAD)
        loss.backward()
        opt.step()
    return loss.item()


@pytest.mark.parametrize("attention,style", [("additive", "bahdanau"), ("general", "luong")])
def test_overfits_32_pairs_to_exact_output(attention, style, toy):
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(src_vocab=VOCAB, tgt_vocab=VOCAB, emb_dim=32, hidden=64,
                           dropout=0.0, attention=attention, style=style)
    model = RNNSeq2Seq(cfg)
    pairs = toy.pairs(32, VOCAB, seed=7)
    _overfit(model, pairs, toy)
    src, src_len, _, _ = toy.batch(pairs)
    hyps = greedy_decode(model, src, src_len)
    assert [h.tokens for h in hyps] == [t for _, t in pairs]
    assert all(h.ended for h in hyps)
    assert toy.BOS not in hyps[0].tokens and toy.EOS not in hyps[0].tokens


def test_local_m_window_follows_the_target_step(toy):
    model = make("local-m", "luong", window=1).eval()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(4, VOCAB, min_len=5, max_len=6))
    _, attn = model(src, src_len, tgt_in, need_weights=True)
    for t in range(tgt_in.shape[1]):
        outside = (torch.arange(src.shape[1]) - t).abs() > 1
        assert (attn[:, t, outside] == 0).all()
