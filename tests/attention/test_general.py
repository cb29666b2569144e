"""GeneralAttention (Luong bilinear) against the plain formula softmax(q W k^T) v."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import GeneralAttention


def reference(att, q, k, v, key_lengths=None):
    """Plain loops-free formula written independently of the module."""
    scores = torch.einsum("bqd,de,bke->bqk", q, att.weight_proj.weight, k)
    if key_lengths is not None:
        real = torch.arange(k.shape[1])[None, :] < key_lengths[:, None]
        scores = scores.masked_fill(~real[:, None, :], float("-inf"))
    w = torch.softmax(scores, -1)
    return w @ v, w


def test_matches_formula_with_lengths():
    torch.manual_seed(0)
    att = GeneralAttention(5, 4)
    q, k, v = torch.randn(3, 2, 5), torch.randn(3, 6, 4), torch.randn(3, 6, 7)
    lengths = torch.tensor([6, 3, 1])
    out = att(q, k, v, key_lengths=lengths, need_weights=True)
    ctx, w = reference(att, q, k, v, lengths)
    torch.testing.assert_close(out.context, ctx)
    torch.testing.assert_close(out.weights, w)
    assert (out.weights[1, :, 3:] == 0).all() and (out.weights[2, :, 1:] == 0).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(3, 2))


def test_weights_none_unless_asked():
    att = GeneralAttention(3, 3)
    assert att(torch.randn(1, 2, 3), torch.randn(1, 4, 3)).weights is None


def test_gradcheck_float64():
    torch.manual_seed(1)
    att = GeneralAttention(3, 2).double()
    q = torch.randn(2, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [True, False, False, False]])
    assert torch.autograd.gradcheck(lambda q, k: att(q, k, key_mask=mask).context, (q, k))


def test_all_masked_row_zero_with_finite_grads_and_padded_queries_zero():
    att = GeneralAttention(3, 3)
    q = torch.randn(2, 3, 3, requires_grad=True)
    k = torch.randn(2, 4, 3, requires_grad=True)
    out = att(q, k, key_lengths=torch.tensor([0, 4]), query_lengths=torch.tensor([3, 1]),
              need_weights=True)
    assert (out.weights[0] == 0).all() and (out.context[0] == 0).all()
    assert (out.context[1, 1:] == 0).all() and (out.weights[1, 1:] == 0).all()
    out.context.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()


def test_memory_attend_equals_forward():
    torch.manual_seed(2)
    att = GeneralAttention(4, 5)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 6, 5)
    lengths = torch.tensor([6, 2])
    full = att(q, k, key_lengths=lengths, need_weights=True)
    mem = att.memory(k, key_lengths=lengths)
    for t in range(3):
        step = att.attend(q[:, t:t + 1], mem, need_weights=True)
        torch.testing.assert_close(step.context[:, 0], full.context[:, t])
        torch.testing.assert_close(step.weights[:, 0], full.weights[:, t])


def test_bfloat16_runs():
    att = GeneralAttention(4, 4).to(torch.bfloat16)
    q, k = torch.randn(2, 3, 4, dtype=torch.bfloat16), torch.randn(2, 5, 4, dtype=torch.bfloat16)
    out = att(q, k, need_weights=True, causal=True)
    assert out.context.dtype == torch.bfloat16 and torch.isfinite(out.context.float()).all()
    torch.testing.assert_close(out.weights.float().sum(-1), torch.ones(2, 3), atol=2e-2, rtol=0)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6), st.data())
def test_property_rows_sum_to_one_over_real_keys(batch, tq, tk, data):
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, tk), min_size=batch,
                                              max_size=batch)))
    torch.manual_seed(0)
    att = GeneralAttention(3, 2)
    out = att(torch.randn(batch, tq, 3), torch.randn(batch, tk, 2), key_lengths=lengths,
              need_weights=True)
    real = torch.arange(tk)[None, None, :] < lengths[:, None, None]
    assert (out.weights[~real.expand_as(out.weights)] == 0).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(batch, tq))


@pytest.mark.parametrize(
    "kwargs, query, key, match",
    [
        ({}, (2, 3, 4), (2, 5, 6), r"key must have shape \[batch, time, 5\]"),
        ({}, (2, 3, 3), (2, 5, 5), r"query must have shape \[batch, time, 4\]"),
        ({}, (2, 3, 4), (3, 5, 5), "batch sizes differ"),
        ({"key_lengths": torch.tensor([6, 1])}, (2, 3, 4), (2, 5, 5), r"0\.\.5"),
        ({"key_mask": torch.ones(2, 4, dtype=torch.bool)}, (2, 3, 4), (2, 5, 5),
         r"key_mask must have shape \[2, 5\]"),
        ({"key_mask": torch.ones(2, 5)}, (2, 3, 4), (2, 5, 5), "bool"),
        ({"attn_mask": torch.ones(4, 5, dtype=torch.bool)}, (2, 3, 4), (2, 5, 5),
         r"attn_mask must have shape"),
    ],
)
def test_bad_input_raises_value_error(kwargs, query, key, match):
    att = GeneralAttention(4, 5)
    with pytest.raises(ValueError, match=match):
        att(torch.randn(*query), torch.randn(*key), **kwargs)
