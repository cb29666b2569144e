"""MultiHeadAttention: equal to torch.nn.MultiheadAttention, to a per-head formula, RoPE, Keras."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.attention import MultiHeadAttention


def per_head_reference(m, query, key, value, allowed, rotate=None):
    """Loop over heads with plain torch ops (float64); ``allowed [b, h, tq, tk]`` bool."""
    h, d = m.num_heads, m.head_dim
    wq, wk, wv = (w.detach().double() for w in m._proj_weights())
    bq, bk, bv = (None if b is None else b.detach().double() for b in m._proj_biases())

    def lin(x, w, b):
        y = x.double() @ w.T
        return y if b is None else y + b

    q, k, v = lin(query, wq, bq), lin(key, wk, bk), lin(value, wv, bv)
    heads = []
    for i in range(h):
        qi, ki, vi = (t[..., i * d:(i + 1) * d] for t in (q, k, v))
        if rotate is not None:
            qi, ki = rotate(qi), rotate(ki)
        s = qi @ ki.transpose(1, 2) / math.sqrt(d)
        a = torch.tensor(np.array(allowed[:, i]))
        s = s.masked_fill(~a, -math.inf)
        w = torch.softmax(s, -1).nan_to_num(0.0)
        heads.append(w @ vi)
    out = torch.cat(heads, -1)
    if m.out_proj is not None:
        out = out @ m.out_proj.weight.detach().double().T
        if m.out_proj.bias is not None:
            out = out + m.out_proj.bias.detach().double()
    return out


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("kdim, vdim", [(None, None), (12, 20)])
def test_equals_torch_mha(bias, batch_first, kdim, vdim):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(16, 4, bias=bias, kdim=kdim, vdim=vdim,
                                batch_first=batch_first).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(3, 5, 16)
    k, v = torch.randn(3, 7, kdim or 16), torch.randn(3, 7, vdim or 16)
    pad = torch.zeros(3, 7, dtype=torch.bool)  # torch convention: True = padding
    pad[1, 4:] = True
    pad[2, 1:] = True

    def torch_call(q, k, v, **kw):
        if not batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        out, w = ref(q, k, v, average_attn_weights=False, **kw)
        return (out if batch_first else out.transpose(0, 1)), w

    want, want_w = torch_call(x, k, v, key_padding_mask=pad)
    for nw in (True, False):
        got = ours(x, k, v, key_mask=~pad, need_weights=nw)
        torch.testing.assert_close(got.context, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(x, k, v, key_mask=~pad, need_weights=True).weights, want_w)
    if kdim is None:  # self-attention, causal
        causal = nn.Transformer.generate_square_subsequent_mask(5)
        want, _ = torch_call(x, x, x, attn_mask=causal)
        for nw in (True, False):
            got = ours(x, x, causal=True, need_weights=nw).context
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_per_head_mask_and_all_masked_head_row():
    torch.manual_seed(0)
    m = MultiHeadAttention(8, key_dim=6, value_dim=5, num_heads=2, head_dim=3)
    q = torch.randn(2, 4, 8, requires_grad=True)
    k = torch.randn(2, 5, 6, requires_grad=True)
    v = torch.randn(2, 5, 5, requires_grad=True)
    mask = torch.rand(2, 2, 4, 5) > 0.4
    mask[0, 1, 2] = False  # head 1 of row (0, 2) sees nothing
    lengths = torch.tensor([5, 3])
    allowed = mask.numpy() & (np.arange(5)[None, None, None, :] < lengths.numpy()[:, None, None,
                                                                                    None])
    want = per_head_reference(m, q, k, v, allowed)
    outs = [m(q, k, v, attn_mask=mask, key_lengths=lengths, need_weights=nw) for nw in (1, 0)]
    for out in outs:
        torch.testing.assert_close(out.context.double(), want, atol=1e-5, rtol=1e-5)
    assert outs[0].weights.shape == (2, 2, 4, 5)
    assert torch.equal(outs[0].weights[0, 1, 2], torch.zeros(5))
    for out in outs:
        q.grad = k.grad = v.grad = None
        out.context.sum().backward()
        assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("need_weights", [True, False])
def test_query_lengths_zero_outputs(need_weights):
    m = MultiHeadAttention(8, num_heads=2)
    x = torch.randn(2, 4, 8)
    out = m(x, x, query_lengths=torch.tensor([4, 1]), need_weights=need_weights)
    assert torch.equal(out.context[1, 1:], torch.zeros(3, 8))
    assert out.context[0].abs().sum() > 0


def test_keras_2018_mode():
    m = MultiHeadAttention.keras_2018(nb_head=4, size_per_head=5, query_dim=12, key_dim=7)
    assert all("bias" not in name for name, _ in m.named_parameters())
    assert m.out_proj is None
    bound = math.sqrt(6 / (12 + 20))  # glorot uniform of WQ [12, 20]
    assert m.q_proj_weight.abs().max() <= bound
    q, k = torch.randn(2, 3, 12), torch.randn(2, 6, 7)
    out = m(q, k, key_lengths=torch.tensor([6, 2]), query_lengths=torch.tensor([3, 2]))
    assert out.context.shape == (2, 3, 20)
    allowed = np.ones((2, 4, 3, 6), dtype=bool)
    allowed[1, :, :, 2:] = False
    want = per_head_reference(m, q, k, k, allowed)
    want[1, 2:] = 0
    torch.testing.assert_close(out.context.double(), want, atol=1e-5, rtol=1e-5)


def _rotate_complex(x, positions, base=10000.0):
    """RoPE as complex multiplication, pairs (i, i + d/2): the rotate-half convention."""
    d = x.shape[-1]
    half = d // 2
    freqs = 1.0 / base ** (torch.arange(half, dtype=torch.float64) * 2 / d)
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    z = z * torch.polar(torch.ones(half, dtype=torch.float64),
                        positions.double()[:, None] * freqs)
    return torch.cat([z.real, z.imag], -1)


def test_rope_matches_formula_and_incremental_positions():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, num_heads=2, rope=True)
    x = torch.randn(2, 6, 16)
    allowed = np.broadcast_to(np.tril(np.ones((6, 6), dtype=bool)), (2, 2, 6, 6))
    want = per_head_reference(m, x, x, x, allowed,
                              rotate=lambda t: _rotate_complex(t, torch.arange(6)))
    for nw in (True, False):
        got = m(x, x, causal=True, need_weights=nw).context
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    # Incremental decoding: the last query alone, at position 5, over all six keys.
    last = m(x[:, 5:], x, query_positions=torch.tensor([5]), key_positions=torch.arange(6))
    torch.testing.assert_close(last.context.double(), want[:, 5:], atol=1e-5, rtol=1e-5)


def test_positions_need_rope():
    m = MultiHeadAttention(8, num_heads=2)
    x = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="rope=True"):
        m(x, x, query_positions=torch.arange(3))


def test_gradcheck_float64():
    torch.manual_seed(0)
    m = MultiHeadAttention(4, key_dim=3, num_heads=2, rope=True).double()
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([4, 2])
    for nw in (True, False):
        assert torch.autograd.gradcheck(
            lambda q, k, nw=nw: m(q, k, key_lengths=lengths, need_weights=nw).context, (q, k))


def test_bfloat16_close_to_float32():
    torch.manual_seed(0)
    m = MultiHeadAttention(32, num_heads=4)
    x = torch.randn(2, 9, 32)
    lengths = torch.tensor([9, 4])
    ref = m(x, x, key_lengths=lengths).context
    mb = MultiHeadAttention(32, num_heads=4).bfloat16()
    mb.load_state_dict(m.state_dict())
    for nw in (True, False):
        low = mb(x.bfloat16(), x.bfloat16(), key_lengths=lengths, need_weights=nw).context
        assert low.dtype == torch.bfloat16
        torch.testing.assert_close(low.float(), ref, atol=6e-2, rtol=6e-2)


def test_no_per_call_state():
    m = MultiHeadAttention(8, num_heads=2, dropout=0.1)
    before = dict(vars(m))
    x = torch.randn(1, 3, 8)
    m(x, x, need_weights=True)
    m(x, x, causal=True)
    assert dict(vars(m)).keys() == before.keys()
    assert all(vars(m)[key] is before[key] for key in before if key != "_modules")


@pytest.mark.parametrize(
    "q_shape, k_shape, kwargs, match",
    [
        ((2, 3, 8), (3, 4, 6), {}, r"batch sizes differ"),
        ((2, 3, 7), (2, 4, 6), {}, r"query must have shape \[batch, time, 8\]"),
        ((2, 3, 8), (2, 4, 5), {}, r"key must have shape \[batch, time, 6\]"),
        ((2, 3, 8), (2, 4, 6), dict(key_lengths=torch.tensor([5, 1])), r"0..4"),
        ((2, 3, 8), (2, 4, 6), dict(attn_mask=torch.ones(2, 3, 3, 4, dtype=torch.bool)),
         r"\[2, 2, 3, 4\]"),
        ((2, 3, 8), (2, 4, 6), dict(attn_mask=torch.ones(3, 4, dtype=torch.int64)), r"bool"),
    ],
)
def test_bad_input(q_shape, k_shape, kwargs, match):
    m = MultiHeadAttention(8, key_dim=6, num_heads=2)
    with pytest.raises(ValueError, match=match):
        m(torch.randn(*q_shape), torch.randn(*k_shape), **kwargs)


def test_constructor_and_loader_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, num_heads=4)
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="size mismatch"):
        MultiHeadAttention(8, num_heads=4).load_torch_weights(nn.MultiheadAttention(8, 2))


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 3), tq=st.integers(1, 5), tk=st.integers(1, 5), h=st.integers(1, 3),
       d=st.integers(1, 4), causal=st.booleans(), seed=st.integers(0, 2**16))
def test_property_fast_equals_explicit(b, tq, tk, h, d, causal, seed):
    torch.manual_seed(seed)
    m = MultiHeadAttention(6, key_dim=5, num_heads=h, head_dim=d)
    q, k = torch.randn(b, tq, 6), torch.randn(b, tk, 5)
    lengths = torch.randint(0, tk + 1, (b,))
    mask = torch.rand(b, h, tq, tk) > 0.3
    kw = dict(key_lengths=lengths, attn_mask=mask, causal=causal)
    slow = m(q, k, need_weights=True, **kw)
    fast = m(q, k, **kw)
    torch.testing.assert_close(fast.context, slow.context, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(fast.context).all()
    w = slow.weights
    real = w.sum(-1)
    assert torch.allclose(real[real > 0], torch.ones_like(real[real > 0]), atol=1e-5)


def test_fast_path_keeps_no_weight_matrix():
    m = MultiHeadAttention(8, num_heads=2)
    x = torch.randn(2, 64, 8, requires_grad=True)
    sizes = []

    def pack(t):
        sizes.append(t.numel() if t.is_floating_point() else 0)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m(x, x, key_lengths=torch.tensor([64, 5]))
        m(x, x, causal=True)
    assert max(sizes) < 64 * 64


# --- incremental decoding ---------------------------------------------------------------------

def _causal(b, h, t):
    return torch.ones(t, t, dtype=torch.bool).tril().expand(b, h, t, t)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("chunks", [(1, 1, 1, 1, 1), (2, 3), (5,)])
def test_cached_self_attention_equals_the_per_head_reference(rope, chunks):
    """Positions fed in chunks (one at a time, or several) through the cache give, at each
    position, causal attention over the whole sequence computed head by head in float64."""
    torch.manual_seed(1)
    m = MultiHeadAttention(16, num_heads=4, rope=rope).eval()
    x = torch.randn(3, 5, 16)
    rotate = None
    if rope:
        def rotate(t):   # the positions of the whole sequence, 0..4
            return m.rope(t.unsqueeze(1), torch.arange(t.shape[1])).squeeze(1)
    want = per_head_reference(m, x, x, x, _causal(3, 4, 5).numpy(), rotate)
    cache = m.start_cache(3, capacity=2, like=x)   # small: it has to grow
    outs, start = [], 0
    for t in chunks:
        outs.append(m.attend_cached(x[:, start:start + t], cache).context)
        start += t
    assert cache.length == 5 and cache.keys.capacity >= 5
    torch.testing.assert_close(torch.cat(outs, 1).double(), want, atol=1e-5, rtol=1e-4)


def test_cached_self_attention_weights_sum_to_one_over_the_past():
    torch.manual_seed(2)
    m = MultiHeadAttention(8, num_heads=2).eval()
    x = torch.randn(2, 4, 8)
    cache = m.start_cache(2, capacity=8, like=x)
    m.attend_cached(x[:, :1], cache)
    out = m.attend_cached(x[:, 1:4], cache, need_weights=True)
    assert out.weights.shape == (2, 2, 3, 4)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 2, 3))
    # New position i (absolute 1 + i) sees keys 0..1+i: the later ones get exactly zero.
    assert out.weights[:, :, 0, 2:].eq(0).all() and out.weights[:, :, 1, 3].eq(0).all()


@pytest.mark.parametrize("group", [1, 3])
def test_source_attention_equals_forward_for_every_row_of_a_sentence(group):
    """g rows per sentence (beams) attend to the sentence's one projection: each row equals
    `forward` over the source with the sentence's padding masked; the weights sum to one over
    the real positions and are exactly zero on padding."""
    torch.manual_seed(3)
    m = MultiHeadAttention(16, num_heads=4).eval()
    source, lengths = torch.randn(2, 6, 16), torch.tensor([6, 3])
    x = torch.randn(2 * group, 2, 16)
    fixed = m.source_keys_values(source, lengths)
    assert fixed.keys.shape == (2, 4, 6, 4) and fixed.mask.shape == (2, 1, 1, 6)
    got = m.attend_source(x, fixed, need_weights=True)
    fused = m.attend_source(x, fixed).context
    rows_source = source.repeat_interleave(group, 0)
    want = m(x, rows_source, key_lengths=lengths.repeat_interleave(group), need_weights=True)
    torch.testing.assert_close(got.context, want.context, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused, want.context, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got.weights, want.weights, atol=1e-6, rtol=1e-5)
    padded = got.weights.view(2, group, 4, 2, 6)[1, ..., 3:]
    assert padded.eq(0).all()
    # A batch without padding needs no mask at all.
    assert m.source_keys_values(source, torch.tensor([6, 6])).mask is None


def test_an_empty_source_reads_zeros_never_nan():
    torch.manual_seed(4)
    m = MultiHeadAttention(8, num_heads=2).eval()
    fixed = m.source_keys_values(torch.randn(2, 3, 8), torch.tensor([3, 0]))
    out = m.attend_source(torch.randn(2, 1, 8), fixed, need_weights=True)
    assert torch.isfinite(out.context).all() and out.weights[1].eq(0).all()
    torch.testing.assert_close(out.context[1], m.out_proj.bias.detach().expand(1, 8))
    fused = m.attend_source(torch.randn(2, 1, 8), fixed).context
    torch.testing.assert_close(fused[1], m.out_proj.bias.detach().expand(1, 8))


def test_incremental_calls_refuse_what_they_cannot_do():
    m = MultiHeadAttention(8, num_heads=2)
    with pytest.raises(ValueError, match=r"attend_cached needs \[rows, time, 8\]"):
        m.attend_cached(torch.randn(2, 8), m.start_cache(2, 4, torch.zeros(1)))
    fixed = m.source_keys_values(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="not a multiple of the 2 sentences"):
        m.attend_source(torch.randn(3, 1, 8), fixed)
    with pytest.raises(ValueError, match="rotary positions are for self-attention"):
        MultiHeadAttention(8, num_heads=2, rope=True).source_keys_values(torch.randn(1, 3, 8))
    cross = MultiHeadAttention(8, key_dim=6, num_heads=2)
    with pytest.raises(ValueError, match="equal query, key and value sizes"):
        cross.attend_cached(torch.randn(1, 1, 8), cross.start_cache(1, 4, torch.zeros(1)))
    # A cross-attention module of other key sizes projects its source once all the same.
    torch.testing.assert_close(
        cross.attend_source(torch.randn(1, 2, 8), cross.source_keys_values(
            torch.zeros(1, 3, 6))).context.shape, torch.Size([1, 2, 8]))


def test_many_rows_of_one_query_give_the_fused_kernels_result(monkeypatch):
    """Past `MANY_MATRICES` (row, head) pairs a decoding step runs two matmuls instead of SDPA:
    the same numbers, masked keys still excluded."""
    from attnkit.attention import multi_head

    torch.manual_seed(5)
    m = MultiHeadAttention(16, num_heads=4).eval()
    source, lengths = torch.randn(20, 7, 16), torch.randint(1, 8, (20,))
    x = torch.randn(20, 1, 16)
    fixed = m.source_keys_values(source, lengths)
    want = m(x, source, key_lengths=lengths).context
    calls = []
    real = multi_head.F.scaled_dot_product_attention
    monkeypatch.setattr(multi_head.F, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    got = m.attend_source(x, fixed).context
    assert calls == [] and 20 * 4 >= multi_head.MANY_MATRICES
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    cache = m.start_cache(20, 4, x)
    m.attend_cached(x, cache)
    assert calls == []
    m.attend_source(x[:2], m.source_keys_values(source[:2], lengths[:2]))
    assert calls == [1]   # few rows: the fused kernel
