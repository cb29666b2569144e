import pytest
import torch

from attnkit.decoding import greedy_decode
from attnkit.models import TransformerConfig, TransformerSeq2Seq, build_model
from attnkit.models.losses import masked_cross_entropy

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

VOCAB = 12  # the vocabulary of the conftest's tiny_transformer



def test_cross_attention_shapes_and_rows(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    logits, cross = model(src, src_len, tgt_in, need_weights=True)
    assert logits.shape == (3, tgt_in.shape[1], VOCAB)
    assert len(cross) == 2
    for w in cross:
        assert w.shape == (3, 4, tgt_in.shape[1], src.shape[1])
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        pad = torch.arange(src.shape[1])[None, :] >= src_len[:, None]   # [B, S]
        assert (w.permute(0, 3, 1, 2)[pad] == 0).all()


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_causal_future_tokens_do_not_change_earlier_logits(tiny_transformer, positional, toy):
    model = tiny_transformer(positional=positional)
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    a = model(src, src_len, tgt_in)
    changed = tgt_in.clone()
    changed[:, 3:] = torch.randint(4, VOCAB, changed[:, 3:].shape)
    b = model(src, src_len, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_step_api_equals_forward(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    logits, cross = model(src, src_len, tgt_in, need_weights=True)
    state = model.encode(src, src_len, beams=1, use_cache=True, weights="none")
    for t in range(tgt_in.shape[1]):
        out = model.step(tgt_in[:, t:t + 1], state, weights="last", logits=True)
        state = out.state
        torch.testing.assert_close(out.logits[:, 0], logits[:, t],
                                   atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(out.weights[:, 0], cross[-1][:, :, t].mean(1), atol=1e-6,
                                   rtol=1e-5)


def test_the_weights_of_one_layer_are_those_of_all_layers(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    logits, every = model(src, src_len, tgt_in, need_weights=True)
    # Asked for one layer's weights, the other layer runs the fused kernel instead of the
    # explicit softmax: float32 sums in another order, ~1e-7 apart on AVX2, AVX512 and AMX.
    for layer in range(2):
        got, one = model(src, src_len, tgt_in, weights_of=layer)
        torch.testing.assert_close(got, logits, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(one, every[layer], atol=1e-6, rtol=1e-5)


def _torch_layer(ours, decoder: bool) -> torch.nn.Module:
    """PyTorch's own pre-norm layer holding ``ours``'s weights (an independent computation)."""
    cls = torch.nn.TransformerDecoderLayer if decoder else torch.nn.TransformerEncoderLayer
    theirs = cls(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True).eval()
    names = {"linear1": "ff.0", "linear2": "ff.3", "self_attn": "self_attn" if decoder
             else "attn", "multihead_attn": "cross_attn"}
    mine = ours.state_dict()
    theirs.load_state_dict({k: mine[names.get(k.split(".")[0], k.split(".")[0]) + k[k.index("."):]]
                            for k in theirs.state_dict()})
    return theirs


def test_layers_compute_what_pytorchs_transformer_layers_compute(tiny_transformer, toy):
    # Two implementations in float32 (PyTorch's fast path against ours): they differ by
    # summation order, ~1e-6 at these sizes on every ISA, well inside 1e-5 + 1e-4 relative.
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    x, y = torch.randn(3, src.shape[1], 32), torch.randn(3, tgt_in.shape[1], 32)
    pad = torch.arange(src.shape[1])[None, :] >= src_len[:, None]
    enc, dec = model.encoder_layers[0], model.decoder_layers[0]
    torch.testing.assert_close(enc(x, src_len)[0][~pad],
                               _torch_layer(enc, False)(x, src_key_padding_mask=pad)[~pad],
                               atol=1e-5, rtol=1e-4)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
    torch.testing.assert_close(dec(y, x, src_len)[0],
                               _torch_layer(dec, True)(y, x, tgt_mask=causal,
                                                       memory_key_padding_mask=pad),
                               atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("use_cache", [True, False])
def test_step_weights_of_every_layer_and_head(tiny_transformer, use_cache, toy):
    model = tiny_transformer()
    src, src_len, tgt_in, _ = toy.batch(toy.pairs(3, VOCAB))
    _, cross = model(src, src_len, tgt_in, need_weights=True)
    state = model.encode(src, src_len, beams=1, use_cache=use_cache, weights="none")
    for t in range(tgt_in.shape[1]):
        out = model.step(tgt_in[:, t:t + 1], state, weights="all", logits=False)
        state, w = out.state, out.weights[:, 0]
        assert out.logits is None
        assert w.shape == (3, 2, 4, src.shape[1])     # [batch, layers, heads, S]
        for layer in range(2):
            torch.testing.assert_close(w[:, layer], cross[layer][:, :, t], atol=1e-6, rtol=1e-5)


def test_encoder_self_attention_is_kept_when_asked(tiny_transformer, toy):
    model = tiny_transformer()
    src, src_len, _, _ = toy.batch(toy.pairs(3, VOCAB))
    kept = model.encode(src, src_len, beams=1, use_cache=True, weights="all").encoder_weights
    assert kept.shape == (3, 2, 4, src.shape[1], src.shape[1])   # [batch, layers, heads, S, S]
    torch.testing.assert_close(kept.sum(-1)[0, :, :, :int(src_len[0])],
                               torch.ones(2, 4, int(src_len[0])))
    assert model.encode(src, src_len, beams=1, use_cache=True,
                        weights="last").encoder_weights is None


def test_source_padding_does_not_change_a_sentence(tiny_transformer, toy):
    model = tiny_transformer()
    pairs = toy.pairs(4, VOCAB, seed=2)
    src, src_len, tgt_in, _ = toy.batch(pairs)
    batched = model(src, src_len, tgt_in)
    for i in range(4):
        s, sl, ti, _ = toy.batch([pairs[i]])
        torch.testing.assert_close(model(s, sl, ti)[0], batched[i, : ti.shape[1]],
                                   atol=1e-5, rtol=1e-4)


def test_build_from_dict_and_bad_config(tiny_transformer, toy):
    model = tiny_transformer()
    again = build_model(model.config.to_dict())
    assert isinstance(again, TransformerSeq2Seq)
    with pytest.raises(ValueError, match="must divide"):
        TransformerConfig(src_vocab=5, tgt_vocab=5, d_model=30, heads=4)


def test_overfits_toy_pairs(toy):
    torch.manual_seed(0)
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=VOCAB, tgt_vocab=VOCAB, d_model=64,
                                                 heads=4, layers=2, ff_dim=128, dropout=0.0))
    pairs = toy.pairs(32, VOCAB, seed=7)
    src, src_len, tgt_in, tgt_out = toy.batch(pairs)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        opt.zero_grad()
        loss, _ = masked_cross_entropy(model(src, src_len, tgt_in), tgt_out, pad_id=toy.PAD)
        loss.backward()
        opt.step()
    hyps = greedy_decode(model, src, src_len)
    assert [h.tokens for h in hyps] == [t for _, t in pairs]


def test_a_compiled_training_forward_is_one_graph_for_every_batch_size(tiny_transformer, toy):
    # The trainer compiles with every size dynamic (attnkit.training.compiling): a shape check
    # that fixes a size (e.g. hashing it into a set) would compile one graph per batch size.
    from torch._dynamo.testing import CompileCounter
    from torch.fx.experimental import _config as fx_config

    model = tiny_transformer().train()
    counter = CompileCounter()

    def loss(src, src_lengths, tgt_in, tgt_out):
        return masked_cross_entropy(model(src, src_lengths, tgt_in), tgt_out, pad_id=toy.PAD)[0]

    torch._dynamo.reset()
    step = torch.compile(loss, dynamic=True, backend=counter)
    with fx_config.patch(use_duck_shape=False):
        for n, seed in ((3, 0), (5, 1), (4, 2)):
            step(*toy.batch(toy.pairs(n, VOCAB, seed=seed, min_len=3, max_len=7)))
            if n == 3:
                first = counter.frame_count
    assert counter.frame_count == first
