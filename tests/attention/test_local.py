"""LocalAttention (Luong local-m / local-p) against a per-query loop of the paper's formula."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import AdditiveAttention, GeneralAttention, LocalAttention


def reference(att, q, k, v, p, lengths):
    """Loop over (batch, query): softmax over the window's real keys, times the Gaussian (if on)."""
    batch, tq, tk = q.shape[0], q.shape[1], k.shape[1]
    scores = att.inner.score(q, k)
    w = torch.zeros(batch, tq, tk, dtype=q.dtype)
    sigma = att.window / 2
    for b in range(batch):
        for t in range(tq):
            keys = [s for s in range(int(lengths[b])) if abs(s - float(p[b, t])) <= att.window]
            if not keys:
                continue
            align = torch.softmax(scores[b, t, keys], -1)
            for a, s in zip(align, keys, strict=True):
                g = math.exp(-((s - float(p[b, t])) ** 2) / (2 * sigma**2)) if att.gaussian else 1
                w[b, t, s] = a * g
    return w @ v, w


def test_monotonic_matches_formula_and_is_zero_outside_window():
    torch.manual_seed(0)
    att = LocalAttention(GeneralAttention(4, 3), window=2)
    assert not att.gaussian  # local-m: the paper's plain window
    q, k, v = torch.randn(2, 7, 4), torch.randn(2, 9, 3), torch.randn(2, 9, 5)
    lengths = torch.tensor([9, 5])
    out = att(q, k, v, key_lengths=lengths, need_weights=True)
    p = torch.arange(7.0).expand(2, 7)
    ctx, w = reference(att, q, k, v, p, lengths)
    torch.testing.assert_close(out.weights, w)
    torch.testing.assert_close(out.context, ctx)
    s, t = torch.arange(9)[None, :], torch.arange(7)[:, None]
    assert (out.weights[:, (s - t).abs() > 2] == 0).all()
    # local-m without the Gaussian: a softmax over the window, rows sum to 1.
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 7))
    # With the Gaussian (local-p's weighting) rows are not renormalised, as in the paper.
    gauss = LocalAttention(att.inner, window=2, gaussian=True)
    sums = gauss(q, k, v, key_lengths=lengths, need_weights=True).weights.sum(-1)
    assert (sums <= 1 + 1e-6).all() and (sums[0] < 1).all()
    # Query 6 of example 1: window 4..8 holds only key 4 (length 5).
    assert (out.weights[1, 6, :4] == 0).all() and out.weights[1, 6, 4] > 0


def test_predictive_matches_formula_and_learns_position():
    torch.manual_seed(1)
    att = LocalAttention(AdditiveAttention(4, 3, 6), window=1, mode="predictive", units=5)
    q, k = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 8, 3)
    lengths = torch.tensor([8, 4])
    out = att(q, k, key_lengths=lengths, need_weights=True)
    gate = torch.sigmoid(torch.tanh(q @ att.position_proj.weight.T) @ att.position_v.weight.T)
    p = lengths[:, None].float() * gate[..., 0]
    ctx, w = reference(att, q.detach(), k, k, p.detach(), lengths)
    torch.testing.assert_close(out.weights, w)
    torch.testing.assert_close(out.context, ctx)
    out.context.sum().backward()
    assert att.position_proj.weight.grad.abs().sum() > 0
    assert att.position_v.weight.grad.abs().sum() > 0


def test_gradcheck_float64_predictive():
    torch.manual_seed(2)
    att = LocalAttention(GeneralAttention(3, 3), window=2, mode="predictive").double()
    q = torch.randn(2, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([6, 3])
    assert torch.autograd.gradcheck(lambda q, k: att(q, k, key_lengths=lengths).context, (q, k))


def test_memory_attend_with_query_positions_equals_forward():
    torch.manual_seed(3)
    for mode in ("monotonic", "predictive"):
        att = LocalAttention(GeneralAttention(4, 4), window=2, mode=mode)
        q, k = torch.randn(2, 5, 4), torch.randn(2, 7, 4)
        full = att(q, k, key_lengths=torch.tensor([7, 4]), need_weights=True)
        mem = att.memory(k, key_lengths=torch.tensor([7, 4]))
        for t in range(5):
            pos = torch.full((2, 1), t) if mode == "monotonic" else None
            step = att.attend(q[:, t:t + 1], mem, need_weights=True, query_positions=pos)
            torch.testing.assert_close(step.weights[:, 0], full.weights[:, t])
            torch.testing.assert_close(step.context[:, 0], full.context[:, t])


def test_renormalize_and_no_gaussian_options():
    torch.manual_seed(4)
    q, k = torch.randn(1, 4, 3), torch.randn(1, 6, 3)
    plain = LocalAttention(GeneralAttention(3, 3), window=1, gaussian=False)
    renorm = LocalAttention(plain.inner, window=1, renormalize=True)
    w = plain(q, k, need_weights=True).weights
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 4))
    torch.testing.assert_close(renorm(q, k, need_weights=True).weights.sum(-1), torch.ones(1, 4))


def test_all_masked_padded_queries_and_bfloat16():
    att = LocalAttention(GeneralAttention(3, 3), window=1)
    q = torch.randn(2, 3, 3, requires_grad=True)
    out = att(q, torch.randn(2, 4, 3), key_lengths=torch.tensor([0, 4]),
              query_lengths=torch.tensor([3, 1]), need_weights=True)
    assert (out.weights[0] == 0).all() and (out.context[1, 1:] == 0).all()
    out.context.sum().backward()
    assert torch.isfinite(q.grad).all()
    att16 = att.to(torch.bfloat16)
    out16 = att16(torch.randn(2, 3, 3, dtype=torch.bfloat16),
                  torch.randn(2, 4, 3, dtype=torch.bfloat16), need_weights=True)
    assert out16.weights.dtype == torch.bfloat16 and torch.isfinite(out16.context.float()).all()


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 8), st.data())
def test_property_zero_outside_window(window, tk, data):
    positions = torch.tensor(data.draw(st.lists(st.floats(-2.0, 10.0), min_size=3, max_size=3)))
    torch.manual_seed(0)
    att = LocalAttention(GeneralAttention(2, 2), window=window)
    out = att(torch.randn(1, 3, 2), torch.randn(1, tk, 2), need_weights=True,
              query_positions=positions[None])
    outside = (torch.arange(tk)[None, :] - positions[:, None]).abs() > window
    assert (out.weights[0][outside] == 0).all()
    assert (out.weights.sum(-1) <= 1 + 1e-6).all()


def test_bad_input():
    inner = GeneralAttention(3, 3)
    with pytest.raises(ValueError, match="window"):
        LocalAttention(inner, window=0)
    with pytest.raises(ValueError, match="mode"):
        LocalAttention(inner, window=1, mode="local")
    att = LocalAttention(inner, window=1)
    with pytest.raises(ValueError, match=r"query_positions must have shape \[2, 3\]"):
        att(torch.randn(2, 3, 3), torch.randn(2, 4, 3), query_positions=torch.zeros(2, 1))
    with pytest.raises(ValueError, match="predictive"):
        LocalAttention(inner, window=1, mode="predictive")(
            torch.randn(2, 3, 3), torch.randn(2, 4, 3), query_positions=torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"key must have shape \[batch, time, 3\]"):
        att(torch.randn(2, 3, 3), torch.randn(2, 4, 2))
