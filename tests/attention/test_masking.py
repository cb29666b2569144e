"""masking.py and base.py helpers: masked_softmax, lengths_to_mask, build_mask, check_inputs."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import (
    AttentionMemory,
    build_mask,
    causal_mask,
    check_inputs,
    lengths_to_mask,
    masked_softmax,
)
from attnkit.attention.base import query_mask_from_lengths


def _reference_softmax(scores, mask):
    """Float64 softmax over the allowed entries, zero rows when nothing is allowed."""
    s = scores.double().masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_masked_softmax_dtypes(dtype):
    torch.manual_seed(0)
    scores = (torch.randn(3, 4, 6) * 30).to(dtype)  # large scores: -1e9 tricks overflow fp16
    mask = torch.rand(3, 4, 6) > 0.4
    mask[0, 1] = False
    w = masked_softmax(scores, mask)
    assert w.dtype == dtype
    assert torch.isfinite(w).all()
    assert (w[~mask] == 0).all()
    assert torch.equal(w[0, 1], torch.zeros(6, dtype=dtype))
    tol = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    torch.testing.assert_close(w.double(), _reference_softmax(scores, mask), atol=tol, rtol=tol)
    sums = w.float().sum(-1)
    rows = mask.any(-1)
    torch.testing.assert_close(sums[rows], torch.ones(int(rows.sum())), atol=tol * 6, rtol=0)


def test_masked_softmax_no_mask_and_other_dim():
    s = torch.randn(2, 5)
    torch.testing.assert_close(masked_softmax(s), torch.softmax(s, -1))
    m = torch.tensor([[True, False, True, True, False]] * 2)
    torch.testing.assert_close(masked_softmax(s.T, m.T, dim=0), masked_softmax(s, m).T)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_masked_softmax_gradients_nan_free(dtype):
    scores = torch.randn(2, 3, 4, dtype=dtype, requires_grad=True)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[1] = False  # whole batch row masked
    mask[0, 0, 1:] = False
    w = masked_softmax(scores, mask)
    (w * torch.randn_like(w)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[1] == 0).all()
    assert (scores.grad[0, 0] == 0).all()  # a single allowed key: weight 1, no gradient


def test_masked_softmax_gradcheck():
    scores = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False, True, True, False], [False] * 5])
    assert torch.autograd.gradcheck(lambda s: masked_softmax(s, mask), (scores,))


def test_masked_softmax_rejects_non_bool_mask():
    with pytest.raises(ValueError, match="bool"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3))


def test_lengths_to_mask():
    m = lengths_to_mask(torch.tensor([0, 2, 3]), 3)
    assert torch.equal(m, torch.tensor([[False] * 3, [True, True, False], [True] * 3]))
    assert lengths_to_mask([1], 2).tolist() == [[True, False]]


@pytest.mark.parametrize(
    "lengths, match",
    [
        (torch.tensor([4]), r"key_lengths must lie in 0..3"),
        (torch.tensor([-1]), r"key_lengths must lie in 0..3"),
        (torch.tensor([1.0]), r"integer"),
        (torch.tensor([[1]]), r"\[batch\]"),
        (torch.tensor([True]), r"integer"),
    ],
)
def test_lengths_to_mask_errors(lengths, match):
    with pytest.raises(ValueError, match=match):
        lengths_to_mask(lengths, 3, name="key_lengths")


def test_causal_mask_matches_sdpa_convention():
    for tq, tk in ((3, 5), (5, 3), (4, 4)):
        q, k, v = torch.randn(1, tq, 2), torch.randn(1, tk, 2), torch.randn(1, tk, 2)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        got = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_mask(tq, tk))
        torch.testing.assert_close(got, want)


def test_build_mask_combinations():
    assert build_mask(2, 3, 4) is None
    lengths = torch.tensor([4, 2])
    key_mask = torch.tensor([[True, False, True, True], [True] * 4])
    attn = torch.rand(3, 4) > 0.3
    m = build_mask(2, 3, 4, key_lengths=lengths, key_mask=key_mask, attn_mask=attn, causal=True)
    want = torch.ones(2, 3, 4, dtype=torch.bool)
    want[1, :, 2:] = False
    want &= key_mask[:, None]
    want &= attn
    want &= torch.ones(3, 4, dtype=torch.bool).tril()
    assert torch.equal(m.expand(2, 3, 4), want)
    assert build_mask(2, 3, 4, key_lengths=lengths).shape == (2, 1, 4)  # O(T), broadcast
    four = build_mask(2, 3, 4, key_lengths=lengths, num_heads=5)
    assert four.shape == (2, 1, 1, 4)
    per_head = torch.rand(2, 5, 3, 4) > 0.5
    m4 = build_mask(2, 3, 4, key_lengths=lengths, attn_mask=per_head, num_heads=5)
    assert torch.equal(m4, per_head & lengths_to_mask(lengths, 4)[:, None, None])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(key_lengths=torch.tensor([1, 2, 3])), r"key_lengths must have shape \[2\]"),
        (dict(key_mask=torch.ones(2, 4)), r"bool"),
        (dict(key_mask=torch.ones(2, 5, dtype=torch.bool)), r"\[2, 4\]"),
        (dict(attn_mask=torch.ones(3, 5, dtype=torch.bool)), r"\[3, 4\] or \[2, 3, 4\]"),
        (dict(attn_mask=torch.ones(2, 5, 3, 4, dtype=torch.bool)), r"attn_mask must have shape"),
    ],
)
def test_build_mask_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_mask(2, 3, 4, **kwargs)


def test_query_mask_and_check_inputs():
    assert query_mask_from_lengths(None, 2, 3) is None
    assert query_mask_from_lengths(torch.tensor([1, 3]), 2, 3).tolist() == [
        [True, False, False], [True, True, True]]
    with pytest.raises(ValueError, match=r"\[2\]"):
        query_mask_from_lengths(torch.tensor([1]), 2, 3)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
    check_inputs(q, k, k, query_dim=4, key_dim=6)
    with pytest.raises(ValueError, match=r"same time length"):
        check_inputs(q, k, torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match=r"\[batch, time, dim\]"):
        check_inputs(torch.randn(3, 4), k, k)
    with pytest.raises(ValueError, match=r"floating"):
        check_inputs(q.long(), k, k)
    with pytest.raises(ValueError, match=r"value must have shape \[batch, time, 3\]"):
        check_inputs(q, k, k, value_dim=3)


def test_memory_reorder():
    mem = AttentionMemory(torch.arange(3.0)[:, None, None], torch.arange(3.0)[:, None, None],
                          torch.tensor([[True], [False], [True]]), torch.zeros(3, 1, 1))
    r = mem.reorder(torch.tensor([2, 2, 0]))
    assert r.keys.flatten().tolist() == [2.0, 2.0, 0.0]
    assert r.key_mask.flatten().tolist() == [True, True, True]
