"""HardAttention: one key per query, both gradient estimators, REINFORCE baseline."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import (
    AdditiveAttention,
    AttentionOutput,
    GeneralAttention,
    HardAttention,
    HardAttentionOutput,
)


def test_eval_is_argmax_one_hot_and_unpacks_like_attention_output():
    torch.manual_seed(0)
    att = HardAttention(GeneralAttention(4, 3)).eval()
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 3), torch.randn(2, 5, 6)
    out = att(q, k, v, key_lengths=torch.tensor([5, 2]), need_weights=True)
    assert isinstance(out, HardAttentionOutput) and isinstance(out, AttentionOutput)
    context, weights = out
    scores = att.mechanism.score(q, k)
    scores[1, :, 2:] = -torch.inf
    expected = scores.argmax(-1)
    assert torch.equal(out.index, expected)
    assert torch.equal(weights, torch.nn.functional.one_hot(expected, 5).float())
    torch.testing.assert_close(context, v[torch.arange(2)[:, None], expected])
    log_soft = torch.log_softmax(scores, -1)
    torch.testing.assert_close(out.log_prob, log_soft.gather(-1, expected[..., None])[..., 0])


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**16))
def test_property_training_never_picks_masked_keys(length, seed):
    torch.manual_seed(seed)
    att = HardAttention(GeneralAttention(2, 2)).train()
    out = att(torch.randn(4, 8, 2), torch.randn(4, 6, 2) * 5, need_weights=True,
              key_lengths=torch.full((4,), length))
    assert (out.index < length).all() and (out.index >= 0).all()
    assert (out.weights.sum(-1) == 1).all() and (out.weights[..., length:] == 0).all()
    assert set(out.weights.unique().tolist()) <= {0.0, 1.0}


def test_sampling_follows_soft_weights():
    torch.manual_seed(1)
    att = HardAttention(GeneralAttention(2, 2)).train()
    q, k = torch.randn(1, 1, 2).expand(4000, 1, 2), torch.randn(1, 3, 2).expand(4000, 3, 2)
    out = att(q, k, need_weights=True)
    soft = torch.softmax(att.mechanism.score(q[:1], k[:1]), -1)[0, 0]
    freq = out.weights[:, 0].mean(0)
    torch.testing.assert_close(freq, soft, atol=0.04, rtol=0)


@pytest.mark.parametrize("estimator", ["straight_through", "reinforce"])
def test_all_masked_row_and_padded_query_give_zero(estimator):
    att = HardAttention(AdditiveAttention(3, 3, 4), estimator).train()
    q = torch.randn(2, 2, 3, requires_grad=True)
    out = att(q, torch.randn(2, 4, 3), key_lengths=torch.tensor([0, 4]),
              query_lengths=torch.tensor([2, 1]), need_weights=True)
    assert (out.weights[0] == 0).all() and (out.context[0] == 0).all()
    assert (out.weights[1, 1] == 0).all() and (out.context[1, 1] == 0).all()
    assert out.index.tolist()[0] == [-1, -1] and out.index[1, 1] == -1
    assert (out.log_prob[0] == 0).all() and out.log_prob[1, 1] == 0
    loss = out.context.sum() + att.reinforce_loss(out.log_prob, torch.tensor([1.0, 2.0]))
    loss.backward()
    assert torch.isfinite(q.grad).all()


def test_straight_through_forward_one_hot_backward_soft():
    torch.manual_seed(2)
    att = HardAttention(GeneralAttention(3, 3), "straight_through").train()
    q, k, v = torch.randn(2, 2, 3), torch.randn(2, 4, 3), torch.randn(2, 4, 5)
    out = att(q, k, v, need_weights=True)
    assert set(out.weights.unique().tolist()) <= {0.0, 1.0}
    out.context.square().sum().backward()
    grad = att.mechanism.weight_proj.weight.grad
    # Expected gradient: d/dW of sum((soft-weighted context taken at the one-hot value)^2).
    w_param = att.mechanism.weight_proj.weight.detach().clone().requires_grad_()
    soft = torch.softmax(torch.einsum("bqd,de,bke->bqk", q, w_param, k), -1)
    hard = out.weights.detach()
    ctx = (hard + soft - soft.detach()) @ v
    ctx.square().sum().backward()
    torch.testing.assert_close(grad, w_param.grad)
    assert grad.abs().sum() > 0


def test_reinforce_gradient_is_score_function_estimate_and_baseline_updates():
    torch.manual_seed(3)
    att = HardAttention(GeneralAttention(3, 3), "reinforce", baseline_momentum=0.5).train()
    q, k = torch.randn(2, 2, 3), torch.randn(2, 4, 3)
    out = att(q, k, need_weights=True)
    reward = torch.tensor([1.0, 3.0])
    loss = att.reinforce_loss(out.log_prob, reward)  # first call: baseline = mean reward = 2
    assert att.baseline.item() == pytest.approx(2.0)
    loss.backward()
    w = att.mechanism.weight_proj.weight
    grad = w.grad.clone()
    assert grad.abs().sum() > 0
    w.grad = None
    logp = torch.log_softmax(att.mechanism.score(q, k), -1).gather(-1, out.index[..., None])
    (-((reward - 2.0) * logp[..., 0].sum(-1)).mean()).backward()
    torch.testing.assert_close(grad, w.grad)
    att.reinforce_loss(out.log_prob.detach(), torch.tensor([6.0, 6.0]))
    assert att.baseline.item() == pytest.approx(0.5 * 2.0 + 0.5 * 6.0)
    att.eval()
    att.reinforce_loss(out.log_prob.detach(), torch.tensor([0.0, 0.0]))
    assert att.baseline.item() == pytest.approx(4.0)  # eval leaves the baseline alone


def test_reinforce_context_carries_no_score_gradient():
    att = HardAttention(GeneralAttention(3, 3), "reinforce").train()
    v = torch.randn(2, 4, 5, requires_grad=True)
    out = att(torch.randn(2, 2, 3), torch.randn(2, 4, 3), v)
    out.context.sum().backward()
    assert att.mechanism.weight_proj.weight.grad is None  # only log_prob reaches the score
    assert v.grad.abs().sum() > 0


def test_memory_attend_equals_forward_in_eval_and_bfloat16():
    torch.manual_seed(4)
    att = HardAttention(AdditiveAttention(3, 3, 5)).eval()
    q, k = torch.randn(2, 3, 3), torch.randn(2, 4, 3)
    full = att(q, k, need_weights=True)
    mem = att.memory(k)
    step = att.attend(q[:, 1:2], mem, need_weights=True)
    torch.testing.assert_close(step.weights[:, 0], full.weights[:, 1])
    att16 = att.to(torch.bfloat16).train()
    out = att16(q.bfloat16(), k.bfloat16(), need_weights=True)
    assert out.context.dtype == torch.bfloat16 and (out.weights.float().sum(-1) == 1).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="estimator"):
        HardAttention(GeneralAttention(3, 3), "gumbel")
    att = HardAttention(GeneralAttention(3, 3), "reinforce")
    with pytest.raises(ValueError, match=r"reward must have shape \[2\]"):
        att.reinforce_loss(torch.zeros(2, 3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"key must have shape \[batch, time, 3\]"):
        att(torch.randn(2, 3, 3), torch.randn(2, 4, 2))
