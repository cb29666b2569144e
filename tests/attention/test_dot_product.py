"""DotProductAttention: against a float64 NumPy formula, fast (SDPA) path == explicit path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import DotProductAttention, fused_attention


def reference(q, k, v, allowed, scale, qmask=None):
    """Row-by-row NumPy attention in float64; empty rows give zeros. ``allowed [b, tq, tk]``."""
    q, k, v = (t.detach().double().numpy() for t in (q, k, v))
    b, tq, tk = q.shape[0], q.shape[1], k.shape[1]
    w = np.zeros((b, tq, tk))
    for i in range(b):
        for j in range(tq):
            idx = [t for t in range(tk) if allowed[i][j][t]]
            if not idx or (qmask is not None and not qmask[i][j]):
                continue
            s = np.array([q[i, j] @ k[i, t] * scale for t in idx])
            e = np.exp(s - s.max())
            w[i, j, idx] = e / e.sum()
    return w @ v, w


def allowed_from(b, tq, tk, key_lengths=None, attn_mask=None, causal=False):
    allowed = np.ones((b, tq, tk), dtype=bool)
    if key_lengths is not None:
        for i, n in enumerate(key_lengths.tolist()):
            allowed[i, :, n:] = False
    if attn_mask is not None:
        allowed &= np.broadcast_to(attn_mask.numpy(), (b, tq, tk))
    if causal:
        allowed &= np.tril(np.ones((tq, tk), dtype=bool))
    return allowed


CASES = [
    dict(),
    dict(key_lengths=[5, 2, 0]),
    dict(causal=True),
    dict(key_lengths=[5, 3, 4], causal=True),
    dict(attn_mask="2d"),
    dict(attn_mask="3d", key_lengths=[1, 5, 2]),
]


def _make(case, b=3, tq=4, tk=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    kw = {}
    if "key_lengths" in case:
        kw["key_lengths"] = torch.tensor(case["key_lengths"])
    if case.get("causal"):
        kw["causal"] = True
    if case.get("attn_mask") == "2d":
        kw["attn_mask"] = torch.rand(tq, tk, generator=g) > 0.4
    if case.get("attn_mask") == "3d":
        kw["attn_mask"] = torch.rand(b, tq, tk, generator=g) > 0.4
    return kw


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_both_paths_match_formula(case, scaled):
    torch.manual_seed(1)
    q, k, v = torch.randn(3, 4, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 6)
    kw = _make(case)
    allowed = allowed_from(3, 4, 5, kw.get("key_lengths"), kw.get("attn_mask"),
                           kw.get("causal", False))
    want_c, want_w = reference(q, k, v, allowed, 1 / math.sqrt(8) if scaled else 1.0)
    att = DotProductAttention(scaled=scaled)
    slow = att(q, k, v, need_weights=True, **kw)
    fast = att(q, k, v, **kw)
    assert fast.weights is None
    np.testing.assert_allclose(slow.weights.numpy(), want_w, atol=1e-6)
    np.testing.assert_allclose(slow.context.numpy(), want_c, atol=1e-5)
    np.testing.assert_allclose(fast.context.numpy(), want_c, atol=1e-5)
    torch.testing.assert_close(fast.context, slow.context, atol=1e-5, rtol=1e-5)


def test_masked_keys_exact_zero_and_rows_sum_to_one():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 6, 4)
    out = DotProductAttention()(q, k, key_lengths=torch.tensor([4, 6]), need_weights=True)
    assert (out.weights[0, :, 4:] == 0).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 3))


@pytest.mark.parametrize("need_weights", [True, False])
def test_all_masked_row_zero_context_finite_grads(need_weights):
    q = torch.randn(2, 3, 4, requires_grad=True)
    k = torch.randn(2, 5, 4, requires_grad=True)
    v = torch.randn(2, 5, 4, requires_grad=True)
    attn_mask = torch.ones(2, 3, 5, dtype=torch.bool)
    attn_mask[1, 2] = False  # one row with no key
    out = DotProductAttention()(q, k, v, key_lengths=torch.tensor([0, 5]), attn_mask=attn_mask,
                                need_weights=need_weights)
    assert torch.equal(out.context[0], torch.zeros(3, 4))
    assert torch.equal(out.context[1, 2], torch.zeros(4))
    assert torch.isfinite(out.context).all()
    (out.context ** 2).sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[0], torch.zeros(3, 4))


@pytest.mark.parametrize("need_weights", [True, False])
def test_padded_queries_zero(need_weights):
    q, k = torch.randn(2, 4, 4), torch.randn(2, 5, 4)
    out = DotProductAttention()(q, k, query_lengths=torch.tensor([2, 4]),
                                need_weights=need_weights)
    assert torch.equal(out.context[0, 2:], torch.zeros(2, 4))
    assert out.context[1].abs().sum() > 0
    if need_weights:
        assert torch.equal(out.weights[0, 2:], torch.zeros(2, 5))


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradcheck_float64(need_weights):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    att = DotProductAttention()
    lengths = torch.tensor([2, 0])  # includes an empty batch row

    def f(q, k, v):
        return att(q, k, v, key_lengths=lengths, causal=True, need_weights=need_weights).context

    assert torch.autograd.gradcheck(f, (q, k, v))


@pytest.mark.parametrize("need_weights", [True, False])
def test_bfloat16_close_to_float32(need_weights):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.randn(2, 7, 16)
    lengths = torch.tensor([7, 3])
    att = DotProductAttention()
    ref = att(q, k, v, key_lengths=lengths).context
    low = att(q.bfloat16(), k.bfloat16(), v.bfloat16(), key_lengths=lengths,
              need_weights=need_weights)
    assert low.context.dtype == torch.bfloat16
    torch.testing.assert_close(low.context.float(), ref, atol=5e-2, rtol=5e-2)


def test_memory_attend_matches_forward():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
    att = DotProductAttention()
    lengths = torch.tensor([3, 5])
    mem = att.memory(k, v, key_lengths=lengths)
    for nw in (True, False):
        a = att.attend(q, mem, need_weights=nw)
        b = att(q, k, v, key_lengths=lengths, need_weights=nw)
        torch.testing.assert_close(a.context, b.context)


def test_fused_attention_no_keys():
    out = fused_attention(torch.randn(2, 3, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 5), None)
    assert torch.equal(out, torch.zeros(2, 3, 5))


def test_dropout_only_in_training():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    att = DotProductAttention(dropout=0.5).eval()
    torch.testing.assert_close(att(q, k).context, DotProductAttention()(q, k).context)
    att.train()
    out = att(q, k, need_weights=True)
    assert torch.isfinite(out.context).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 3))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(q=(3, 4, 8)), r"batch sizes differ"),
        (dict(q=(2, 4, 7)), r"\[batch, Tq, 8\]"),
        (dict(key_lengths=torch.tensor([6, 1])), r"key_lengths must lie in 0..5"),
        (dict(key_lengths=torch.tensor([-1, 1])), r"key_lengths must lie in 0..5"),
        (dict(key_mask=torch.ones(2, 4, dtype=torch.bool)), r"key_mask must have shape \[2, 5\]"),
        (dict(attn_mask=torch.ones(4, 4, dtype=torch.bool)), r"attn_mask must have shape"),
        (dict(attn_mask=torch.ones(4, 5)), r"attn_mask must be a bool tensor"),
        (dict(query_lengths=torch.tensor([5, 1])), r"query_lengths must lie in 0..4"),
    ],
)
@pytest.mark.parametrize("need_weights", [True, False])
def test_bad_input(kwargs, match, need_weights):
    kwargs = dict(kwargs)  # the parametrised dict is shared between runs
    q = torch.randn(*kwargs.pop("q", (2, 4, 8)))
    with pytest.raises(ValueError, match=match):
        DotProductAttention()(q, torch.randn(2, 5, 8), need_weights=need_weights, **kwargs)


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 3), tq=st.integers(1, 6), tk=st.integers(1, 6), d=st.integers(1, 8),
    causal=st.booleans(), use_mask=st.booleans(), seed=st.integers(0, 2**16),
)
def test_property_fast_equals_explicit_equals_formula(b, tq, tk, d, causal, use_mask, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, t, d, generator=g) for t in (tq, tk, tk))
    lengths = torch.randint(0, tk + 1, (b,), generator=g)
    qlen = torch.randint(0, tq + 1, (b,), generator=g)
    attn_mask = (torch.rand(b, tq, tk, generator=g) > 0.3) if use_mask else None
    kw = dict(key_lengths=lengths, attn_mask=attn_mask, causal=causal, query_lengths=qlen)
    att = DotProductAttention()
    slow = att(q, k, v, need_weights=True, **kw)
    fast = att(q, k, v, **kw)
    allowed = allowed_from(b, tq, tk, lengths, attn_mask, causal)
    qmask = np.arange(tq)[None, :] < qlen.numpy()[:, None]
    want_c, want_w = reference(q, k, v, allowed, 1 / math.sqrt(d), qmask)
    np.testing.assert_allclose(slow.weights.numpy(), want_w, atol=1e-5)
    np.testing.assert_allclose(fast.context.numpy(), want_c, atol=1e-5)
    torch.testing.assert_close(fast.context, slow.context, atol=1e-5, rtol=1e-5)


def _largest_saved(fn, *args):
    """The largest numel among tensors autograd saves for backward while running ``fn``."""
    sizes = []

    def pack(t):
        sizes.append(t.numel() if t.is_floating_point() else 0)  # bool masks are allowed
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return max(sizes)


@pytest.mark.parametrize("kw", [dict(key_lengths=torch.tensor([64, 10])), dict(causal=True)])
def test_fast_path_keeps_no_weight_matrix(kw):
    q = torch.randn(2, 64, 4, requires_grad=True)
    att = DotProductAttention()
    assert _largest_saved(lambda: att(q, q, **kw)) < 64 * 64
    assert _largest_saved(lambda: att(q, q, need_weights=True, **kw)) >= 2 * 64 * 64
