"""Captioner: shapes, masking, the doubly stochastic penalty, decoding, overfitting scenes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.data.scenes import make_scenes
from attnkit.data.vocab import Vocab
from attnkit.decoding import beam_search, greedy_decode
from attnkit.models.captioner import (
    Captioner,
    CaptionerConfig,
    ConvEncoder,
    attention_supervision_penalty,
    caption_loss,
    doubly_stochastic_penalty,
)

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16, "dropout": 0.0}




def small_model(vocab_size: int = 12, **kw) -> Captioner:
    torch.manual_seed(0)
    return Captioner(CaptionerConfig(vocab_size=vocab_size, image_size=32, feature_size=4,
                                     **{**SMALL, **kw}))


def images(batch: int = 3, size: int = 32) -> torch.Tensor:
    return torch.randint(0, 256, (batch, 3, size, size), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_forward_shapes_and_maps_are_distributions(attention):
    model = small_model(attention=attention).eval()
    tgt = torch.randint(4, 12, (3, 5))
    logits, alphas = model(images(), tgt)
    assert logits.shape == (3, 5, 12) and alphas.shape == (3, 5, 4, 4)
    torch.testing.assert_close(alphas.sum((-1, -2)), torch.ones(3, 5))
    if attention == "hard":  # eval mode: exactly one location per word
        assert torch.all((alphas == 0) | (alphas == 1))


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_location_mask_gets_no_attention(attention):
    model = small_model(attention=attention).train()
    mask = torch.ones(3, 4, 4, dtype=torch.bool)
    mask[0, :, :2] = False          # left half of image 0 is padding
    mask[2, 1:, :] = False          # only the top row of image 2 is real
    _, alphas = model(images(), torch.randint(4, 12, (3, 6)), location_mask=mask)
    assert torch.all(alphas.masked_select(~mask.unsqueeze(1).expand_as(alphas)) == 0)
    torch.testing.assert_close(alphas.sum((-1, -2)), torch.ones(3, 6))
    with pytest.raises(ValueError, match=r"location_mask must be bool \[3, 4, 4\]"):
        model.encode(images(), location_mask=mask.flatten(1))


def test_gate_scales_the_context():
    model = small_model(gate=True).eval()
    state = model.encode(images())
    gated = model.attention.attend(state.h, state.memory).context
    model.attention.gate = None
    plain = model.attention.attend(state.h, state.memory).context
    ref = small_model(gate=True)
    beta = torch.sigmoid(ref.attention.gate(state.h))  # same init seed: same gate weights
    torch.testing.assert_close(gated, plain * beta)


def test_doubly_stochastic_penalty_matches_loops():
    g = torch.Generator().manual_seed(3)
    alphas = torch.rand(2, 4, 3, 3, generator=g)
    lengths = torch.tensor([4, 2])
    expected = 0.0
    for b in range(2):
        for i in range(3):
            for j in range(3):
                s = sum(float(alphas[b, t, i, j]) for t in range(int(lengths[b])))
                expected += (1.0 - s) ** 2
    assert float(doubly_stochastic_penalty(alphas, lengths)) == pytest.approx(expected / 2)
    with pytest.raises(ValueError, match=r"\[batch, T, H, W\]"):
        doubly_stochastic_penalty(alphas[0], lengths)


def test_regulariser_is_added_to_the_loss():
    tgt_in, tgt_out = torch.randint(4, 12, (3, 5)), torch.randint(4, 12, (3, 5))
    lengths = torch.tensor([5, 3, 4])
    tgt_out[torch.arange(5) >= lengths[:, None]] = 0  # padded after the real steps
    with torch.no_grad():
        plain = small_model(doubly_stochastic=0.0).eval()
        loss0, ce0, count = caption_loss(plain, images(), tgt_in, tgt_out, lengths)
        reg = small_model(doubly_stochastic=0.5).eval()
        loss1, ce1, _ = caption_loss(reg, images(), tgt_in, tgt_out, lengths)
        _, alphas = reg(images(), tgt_in)
    assert count == 12 and float(loss0) == pytest.approx(float(ce0))
    penalty = doubly_stochastic_penalty(alphas, lengths)
    assert float(loss1) == pytest.approx(float(ce1 + 0.5 * penalty), rel=1e-5)


def test_config_round_trip_and_errors():
    cfg = CaptionerConfig(vocab_size=20, attention="hard")
    assert CaptionerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="attention must be one of"):
        CaptionerConfig(vocab_size=20, attention="sharp")
    with pytest.raises(ValueError, match="unknown CaptionerConfig keys"):
        CaptionerConfig.from_dict({**cfg.to_dict(), "colour": 1})
    with pytest.raises(ValueError, match=r"\[batch, 3, 32, 32\]"):
        small_model().encode(torch.zeros(2, 3, 64, 64))
    with pytest.raises(ValueError, match="power of two"):
        ConvEncoder(64, 6, 16)


@pytest.mark.parametrize("init_pool", ["mean+max", "glimpse"])
def test_beam_one_equals_greedy_and_maps_follow_reordering(init_pool):
    model = small_model(init_pool=init_pool).eval()
    imgs = images(4)
    lengths = torch.full((4,), 16)
    kw = {"max_len_ratio": 1.0, "max_len_offset": 0, "max_len": 6}
    greedy = greedy_decode(model, imgs, lengths, **kw)
    beam1 = beam_search(model, imgs, lengths, beam_size=1, **kw)
    for g, b in zip(greedy, beam1, strict=True):
        assert g.tokens == b.tokens
        torch.testing.assert_close(g.attention, b.attention)
        assert g.attention.shape == (len(g.tokens), 16)
    beam3 = beam_search(model, imgs, lengths, beam_size=3, **kw)
    for hyp, img in zip(beam3, imgs, strict=True):
        # Replaying the chosen words one image at a time gives the same maps: the beam's
        # reorder kept each hypothesis's own history.
        state = model.encode(img.unsqueeze(0))
        prev = torch.tensor([[model.config.bos_id]])
        for t, tok in enumerate(hyp.tokens):
            out = model.step(prev, state, weights="last", logits=True)
            state = out.state
            torch.testing.assert_close(out.weights[0, 0], hyp.attention[t])
            prev = torch.tensor([[tok]])


def test_overfits_a_few_scenes():
    # 32 px scenes (4x4 feature map) keep this fast.
    scenes = make_scenes(4, seed=5, size=32)
    vocab = Vocab.build(s.caption for s in scenes)
    torch.manual_seed(0)
    model = Captioner(CaptionerConfig(vocab_size=len(vocab), image_size=32, feature_size=4,
                                      **SMALL))
    imgs = torch.from_numpy(np.stack([s.image for s in scenes])).permute(0, 3, 1, 2)
    ids = [vocab.encode(s.caption, add_bos=True, add_eos=True) for s in scenes]
    width = max(map(len, ids))
    tgt = torch.tensor([i + [vocab.pad_id] * (width - len(i)) for i in ids])
    lengths = torch.tensor([len(i) - 1 for i in ids])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(80):  # ~50 steps suffice at lr 1e-2; margin for other seeds/BLAS
        loss, _, _ = caption_loss(model, imgs, tgt[:, :-1], tgt[:, 1:], lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hyps = greedy_decode(model, imgs, torch.full((4,), 16), max_len_ratio=1.0,
                         max_len_offset=0, max_len=width)
    assert [vocab.decode(h.tokens) for h in hyps] == [s.caption for s in scenes]
    assert all(h.ended for h in hyps)


@pytest.mark.parametrize("init_pool", ["mean", "mean+max", "none", "glimpse"])
def test_single_image_batch_trains(init_pool):
    # BatchNorm of the pooled feature cannot use batch statistics of one image.
    model = small_model(init_pool=init_pool).train()
    logits, alphas = model(images(1), torch.randint(4, 12, (1, 3)))
    assert logits.shape == (1, 3, 12) and torch.isfinite(logits).all()


def test_init_pool_none_starts_every_image_from_the_same_state():
    model = small_model(init_pool="none").eval()
    state = model.encode(images(3))
    assert state.h.shape == (3, 32)
    torch.testing.assert_close(state.h, state.h[:1].expand(3, -1))
    torch.testing.assert_close(state.c, torch.tanh(model.c0).expand(3, -1))
    # ...so the first word can only learn about the image through its attention glimpse.
    _, alphas = model(images(3), torch.full((3, 1), model.config.bos_id))
    assert not torch.allclose(alphas[0, 0], alphas[1, 0])
    with pytest.raises(ValueError, match="init_pool must be one of"):
        CaptionerConfig(vocab_size=20, init_pool="max")


def test_global_context_gates_channels_by_the_image_mean():
    torch.manual_seed(0)
    enc = ConvEncoder(32, 4, 16, global_context=True).eval()
    x = images(2)
    with torch.no_grad():
        local = enc.net(x.float() / 255.0 - 0.5)  # the plain feature map [2, 16, 4, 4]
        gate = torch.sigmoid(enc.context(local.mean((2, 3))))
        torch.testing.assert_close(enc(x), local * 2 * gate[:, :, None, None])
        # A change far away (bottom-right corner) reaches the top-left location only through
        # the gate: the convolutions alone see about half the image.
        y = x.clone()
        y[:, :, 24:, 24:] = 255 - y[:, :, 24:, 24:]
        assert torch.allclose(enc.net(y.float() / 255.0 - 0.5)[:, :, 0, 0], local[:, :, 0, 0])
        assert not torch.allclose(enc(y)[:, :, 0, 0], enc(x)[:, :, 0, 0])


def test_a_second_glimpse_looks_from_what_the_first_one_saw():
    model = small_model(glimpses=2).eval()
    state = model.encode(images(2))
    prev = torch.full((2,), model.config.bos_id)
    with torch.no_grad():
        _, _, alpha = model.word_step(prev, state)
        first, _ = model.attention.attend(state.h, state.memory, need_weights=True)
        query = torch.tanh(model.glimpse(torch.cat([state.h, first], -1)))
        _, expected = model.attention.attend(query, state.memory, need_weights=True)
        torch.testing.assert_close(alpha.flatten(1), expected.flatten(1))
        _, one_hop = model.attention.attend(state.h, state.memory, need_weights=True)
        assert not torch.allclose(alpha.flatten(1), one_hop.flatten(1))
    with pytest.raises(ValueError, match="glimpses"):
        CaptionerConfig(vocab_size=20, glimpses=0)


def test_glimpse_init_steers_only_the_first_look():
    model = small_model(init_pool="glimpse").eval()
    # It starts as init_pool="none" does: a zero first query.
    assert torch.all(model.encode(images(2)).query == 0)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # as after some training
        for p in (model.glimpse.weight, model.glimpse.bias, model.attention.score.v):
            p.normal_(std=2.0, generator=g)
    state = model.encode(images(2))
    h0 = torch.tanh(model.h0).expand(2, -1)
    torch.testing.assert_close(state.h, h0)  # the state itself stays blank
    prev = torch.full((2,), model.config.bos_id)
    with torch.no_grad():
        seen, _ = model.attention.attend(h0, state.memory, need_weights=True)
        query = torch.tanh(model.glimpse(torch.cat([h0, seen], -1)))
        torch.testing.assert_close(state.query, query)
        _, after, first = model.word_step(prev, state)
        _, expected = model.attention.attend(query, state.memory, need_weights=True)
        torch.testing.assert_close(first.flatten(1), expected.flatten(1))
        _, blank = model.attention.attend(h0, state.memory, need_weights=True)
        assert not torch.allclose(first.flatten(1), blank.flatten(1))
        # Later words look from the decoder state, as without the preliminary glimpse.
        assert after.query is None
        _, _, second = model.word_step(prev, after)
        _, from_h = model.attention.attend(after.h, after.memory, need_weights=True)
        torch.testing.assert_close(second.flatten(1), from_h.flatten(1))


def test_attention_supervision_penalty_matches_loops_and_joins_the_loss():
    g = torch.Generator().manual_seed(4)
    alphas = torch.softmax(torch.randn(2, 3, 4, 4, generator=g).flatten(2), -1).view(2, 3, 4, 4)
    targets = torch.zeros(2, 3, 4, 4)
    targets[0, 0, :2, :2] = 1.0
    targets[0, 2, 3, 3] = 0.25
    targets[1, 1, 1:, 2] = 0.5  # row (1, 0), (1, 2) and (0, 1) name nothing: not supervised
    terms = []
    for b, t in [(0, 0), (0, 2), (1, 1)]:
        mass = sum(float(alphas[b, t, i, j] * targets[b, t, i, j])
                   for i in range(4) for j in range(4))
        terms.append(-np.log(mass))
    assert float(attention_supervision_penalty(alphas, targets)) == pytest.approx(
        np.mean(terms), rel=1e-5)
    assert float(attention_supervision_penalty(alphas, torch.zeros_like(alphas))) == 0.0
    with pytest.raises(ValueError, match="shape of alphas"):
        attention_supervision_penalty(alphas, targets[0])

    model = small_model().eval()
    tgt_in, tgt_out = torch.randint(4, 12, (3, 3)), torch.randint(4, 12, (3, 3))
    lengths = torch.tensor([3, 3, 2])
    maps = torch.zeros(3, 3, 4, 4)
    maps[:, 0, 0, 0] = 1.0
    with torch.no_grad():
        loss0, ce, _ = caption_loss(model, images(), tgt_in, tgt_out, lengths)
        loss1, _, _ = caption_loss(model, images(), tgt_in, tgt_out, lengths,
                                   target_maps=maps, supervision=0.5)
        _, alphas = model(images(), tgt_in)
    expected = float(ce) + 0.5 * float(-torch.log(alphas[:, 0, 0, 0]).mean())
    assert float(loss0) == pytest.approx(float(ce))
    assert float(loss1) == pytest.approx(expected, rel=1e-5)


def test_defaults_are_the_settings_the_app_trains():
    cfg = CaptionerConfig(vocab_size=20)
    assert (cfg.init_pool, cfg.global_context, cfg.version) == ("glimpse", True, 2)
    model = Captioner(cfg)
    assert model.glimpse is not None and not hasattr(model, "init_h")
    assert model.encoder.context is not None
    assert cfg.to_dict()["version"] == 2


def test_other_config_versions_are_refused():
    v2 = CaptionerConfig(vocab_size=20).to_dict()
    with pytest.raises(ValueError, match="version 3"):
        CaptionerConfig.from_dict({**v2, "version": 3})
