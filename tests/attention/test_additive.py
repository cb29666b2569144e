"""AdditiveAttention / ConcatAttention against v^T tanh(W_q q + W_k k + b), blocked and not."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import AdditiveAttention, ConcatAttention
from attnkit.attention.additive import additive_scores

TINY_BUDGET_MB = 1e-6  # forces one query row per block


def reference_scores(att, q, k):
    """Per-pair loop form of the Bahdanau score (independent of the module's broadcasting)."""
    out = torch.empty(q.shape[0], q.shape[1], k.shape[1], dtype=q.dtype)
    for i in range(q.shape[1]):
        for j in range(k.shape[1]):
            hidden = q[:, i] @ att.query_proj.weight.T + k[:, j] @ att.key_proj.weight.T
            if att.key_proj.bias is not None:
                hidden = hidden + att.key_proj.bias
            out[:, i, j] = torch.tanh(hidden) @ att.v
    return out


@pytest.mark.parametrize("budget", [64.0, TINY_BUDGET_MB])
def test_matches_formula(budget):
    torch.manual_seed(0)
    att = AdditiveAttention(5, 4, 6, memory_budget_mb=budget)
    q, k, v = torch.randn(2, 3, 5), torch.randn(2, 4, 4), torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, True, False], [True, False, True, True]])
    out = att(q, k, v, key_mask=mask, need_weights=True)
    w = torch.softmax(reference_scores(att, q, k).masked_fill(~mask[:, None], -torch.inf), -1)
    torch.testing.assert_close(out.weights, w)
    torch.testing.assert_close(out.context, w @ v)
    assert (out.weights[0, :, 3] == 0).all() and (out.weights[1, :, 1] == 0).all()


def test_chunked_equals_unchunked_values_and_gradients():
    torch.manual_seed(1)
    q, k = torch.randn(3, 7, 5), torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 2, 0])
    results = []
    for budget in (64.0, TINY_BUDGET_MB, 3 * 6 * 8 * 4 * 3 / 2**20):  # plain, 1 row, 3 rows
        torch.manual_seed(2)
        att = AdditiveAttention(5, 4, 8, memory_budget_mb=budget)
        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        out = att(qq, kk, key_lengths=lengths, need_weights=True)
        (out.context.square().sum() + out.weights[:, :, 0].sum()).backward()
        grads = [qq.grad, kk.grad] + [p.grad for p in att.parameters()]
        results.append((out.context, out.weights, grads))
    for ctx, w, grads in results[1:]:
        torch.testing.assert_close(ctx, results[0][0])
        torch.testing.assert_close(w, results[0][1])
        for g, g0 in zip(grads, results[0][2], strict=True):
            assert torch.isfinite(g).all()
            torch.testing.assert_close(g, g0)


def test_blocked_score_function_gradcheck_float64():
    torch.manual_seed(3)
    pq = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    pk = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, c: additive_scores(a, b, c, 1e-6), (pq, pk, v))


def test_module_gradcheck_float64_with_masks():
    torch.manual_seed(4)
    att = AdditiveAttention(3, 2, 4, memory_budget_mb=TINY_BUDGET_MB).double()
    q = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)

    def f(q, k):
        return att(q, k, key_lengths=torch.tensor([4, 0]), query_lengths=torch.tensor([2, 3]),
                   causal=True).context

    assert torch.autograd.gradcheck(f, (q, k))


def test_all_masked_row_and_padded_queries_zero():
    att = AdditiveAttention(3, 3, 4)
    out = att(torch.randn(2, 3, 3), torch.randn(2, 4, 3), key_lengths=torch.tensor([0, 4]),
              query_lengths=torch.tensor([3, 2]), need_weights=True)
    assert (out.weights[0] == 0).all() and (out.context[0] == 0).all()
    assert (out.weights[1, 2] == 0).all() and (out.context[1, 2] == 0).all()
    torch.testing.assert_close(out.weights[1, :2].sum(-1), torch.ones(2))


@pytest.mark.parametrize("budget", [64.0, TINY_BUDGET_MB])
def test_memory_attend_equals_forward(budget):
    torch.manual_seed(5)
    att = AdditiveAttention(4, 5, 6, memory_budget_mb=budget)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 6, 5)
    full = att(q, k, key_lengths=torch.tensor([6, 3]), need_weights=True)
    mem = att.memory(k, key_lengths=torch.tensor([6, 3]))
    for t in range(3):
        step = att.attend(q[:, t:t + 1], mem, need_weights=True)
        torch.testing.assert_close(step.context[:, 0], full.context[:, t])
        torch.testing.assert_close(step.weights[:, 0], full.weights[:, t])
    # Beam search reorders the memory rows.
    idx = torch.tensor([1, 1, 0])
    step = att.attend(q[idx, :1], mem.reorder(idx))
    torch.testing.assert_close(step.context[:, 0], full.context[idx, 0])


@pytest.mark.parametrize("budget", [64.0, TINY_BUDGET_MB])
def test_bfloat16_runs_forward_and_backward(budget):
    att = AdditiveAttention(4, 4, 8, memory_budget_mb=budget).to(torch.bfloat16)
    q = torch.randn(2, 3, 4, dtype=torch.bfloat16, requires_grad=True)
    out = att(q, torch.randn(2, 5, 4, dtype=torch.bfloat16), need_weights=True)
    assert out.context.dtype == torch.bfloat16
    torch.testing.assert_close(out.weights.float().sum(-1), torch.ones(2, 3), atol=2e-2, rtol=0)
    out.context.float().sum().backward()
    assert torch.isfinite(q.grad.float()).all()


def test_concat_is_luong_formula_with_concatenated_weight():
    torch.manual_seed(6)
    att = ConcatAttention(3, 2, 5, memory_budget_mb=TINY_BUDGET_MB)
    assert att.key_proj.bias is None and att.weight.shape == (5, 5)
    q, k = torch.randn(2, 3, 3), torch.randn(2, 4, 2)
    pairs = torch.cat([q[:, :, None].expand(-1, -1, 4, -1), k[:, None].expand(-1, 3, -1, -1)], -1)
    scores = torch.tanh(pairs @ att.weight.T) @ att.v
    out = att(q, k, need_weights=True)
    torch.testing.assert_close(out.weights, torch.softmax(scores, -1))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.floats(1e-7, 1e-3))
def test_property_blocking_never_changes_scores(batch, tq, tk, budget):
    torch.manual_seed(0)
    pq, pk, v = torch.randn(batch, tq, 4), torch.randn(batch, tk, 4), torch.randn(4)
    plain = torch.tanh(pq[:, :, None] + pk[:, None]) @ v
    torch.testing.assert_close(additive_scores(pq, pk, v, budget), plain)


@pytest.mark.parametrize("args, match", [((0, 3, 4), ">= 1"), ((3, 3, 4, -1.0), "budget")])
def test_bad_constructor_arguments(args, match):
    kwargs = {"memory_budget_mb": args[3]} if len(args) > 3 else {}
    with pytest.raises(ValueError, match=match):
        AdditiveAttention(*args[:3], **kwargs)


def test_bad_input_raises_value_error():
    att = AdditiveAttention(4, 5, 6)
    with pytest.raises(ValueError, match=r"key must have shape \[batch, time, 5\]"):
        att(torch.randn(2, 3, 4), torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match=r"query_lengths must"):
        att(torch.randn(2, 3, 4), torch.randn(2, 5, 5), query_lengths=torch.tensor([4, 1]))
    with pytest.raises(ValueError, match="bool"):
        att(torch.randn(2, 3, 4), torch.randn(2, 5, 5), key_mask=torch.ones(2, 5, dtype=int))
