"""SpatialAttention (Show, Attend and Tell) against a per-location loop of the formula."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import SpatialAttention


def reference(att, h, feats, mask=None):
    """h [B, D], feats [B, C, H, W] -> context [B, C], weights [B, H, W], looping locations."""
    batch, _, height, width = feats.shape
    s = att.score
    scores = torch.full((batch, height, width), -torch.inf)
    for y in range(height):
        for x in range(width):
            a = feats[:, :, y, x]
            hidden = h @ s.query_proj.weight.T + a @ s.key_proj.weight.T + s.key_proj.bias
            scores[:, y, x] = torch.tanh(hidden) @ s.v
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    w = torch.softmax(scores.flatten(1), -1).view(batch, height, width)
    ctx = torch.einsum("bhw,bchw->bc", w, feats)
    if att.gate is not None:
        ctx = ctx * torch.sigmoid(h @ att.gate.weight.T + att.gate.bias)
    return ctx, w


@pytest.mark.parametrize("gate", [True, False])
def test_matches_formula_2d_query_with_mask(gate):
    torch.manual_seed(0)
    att = SpatialAttention(query_dim=5, channels=4, units=6, gate=gate)
    h, feats = torch.randn(2, 5), torch.randn(2, 4, 3, 2)
    mask = torch.ones(2, 3, 2, dtype=torch.bool)
    mask[1, 2:] = False  # a padded image: bottom row absent
    out = att(h, feats, key_mask=mask, need_weights=True)
    ctx, w = reference(att, h, feats, mask)
    assert out.context.shape == (2, 4) and out.weights.shape == (2, 3, 2)
    torch.testing.assert_close(out.weights, w)
    torch.testing.assert_close(out.context, ctx)
    assert (out.weights[1, 2:] == 0).all()


def test_3d_query_shapes_value_and_memory_attend():
    torch.manual_seed(1)
    att = SpatialAttention(query_dim=5, channels=4, units=6)
    h, feats, values = torch.randn(2, 3, 5), torch.randn(2, 4, 3, 3), torch.randn(2, 7, 3, 3)
    out = att(h, feats, values, need_weights=True, query_lengths=torch.tensor([3, 2]))
    assert out.context.shape == (2, 3, 7) and out.weights.shape == (2, 3, 3, 3)
    assert (out.context[1, 2] == 0).all() and (out.weights[1, 2] == 0).all()
    torch.testing.assert_close(out.weights[0].sum((-1, -2)), torch.ones(3))
    mem = att.memory(feats, values)
    for t in range(3):
        step = att.attend(h[:, t], mem, need_weights=True)
        torch.testing.assert_close(step.context[0], out.context[0, t])
        torch.testing.assert_close(step.weights[0], out.weights[0, t])
    idx = torch.tensor([1, 0, 0])
    step = att.attend(h[idx, 0], mem.reorder(idx), need_weights=True)
    assert step.weights.shape == (3, 3, 3)
    torch.testing.assert_close(step.context, out.context[idx, 0])


def test_gate_scales_context():
    torch.manual_seed(2)
    att = SpatialAttention(3, 2, 4, gate=True)
    ungated = SpatialAttention(3, 2, 4, gate=False)
    ungated.score.load_state_dict(att.score.state_dict())
    h, feats = torch.randn(2, 3), torch.randn(2, 2, 2, 2)
    beta = torch.sigmoid(att.gate(h))
    torch.testing.assert_close(att(h, feats).context, ungated(h, feats).context * beta)


def test_gradcheck_float64_and_all_masked_image():
    torch.manual_seed(3)
    att = SpatialAttention(3, 2, 4).double()
    h = torch.randn(2, 2, 3, dtype=torch.float64, requires_grad=True)
    feats = torch.randn(2, 2, 2, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[[True, False, True], [True, True, False]],
                         [[False, False, False], [False, False, False]]])
    assert torch.autograd.gradcheck(lambda h, f: att(h, f, key_mask=mask).context, (h, feats))
    out = att(h, feats, key_mask=mask, need_weights=True)
    assert (out.weights[1] == 0).all() and (out.context[1] == 0).all()


def test_bfloat16_runs():
    att = SpatialAttention(3, 2, 4).to(torch.bfloat16)
    out = att(torch.randn(2, 3, dtype=torch.bfloat16),
              torch.randn(2, 2, 4, 4, dtype=torch.bfloat16), need_weights=True)
    assert out.context.dtype == torch.bfloat16
    torch.testing.assert_close(out.weights.float().sum((-1, -2)), torch.ones(2), atol=2e-2,
                               rtol=0)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**16))
def test_property_masked_locations_get_zero(height, width, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(2, height, width, generator=g) > 0.4
    att = SpatialAttention(2, 3, 4)
    out = att(torch.randn(2, 2, generator=g), torch.randn(2, 3, height, width, generator=g),
              key_mask=mask, need_weights=True)
    assert (out.weights[~mask] == 0).all()
    sums = out.weights.sum((-1, -2))
    torch.testing.assert_close(sums, mask.any(-1).any(-1).float())


@pytest.mark.parametrize(
    "query, key, kwargs, match",
    [
        ((2, 5), (2, 3, 2, 2), {}, r"query must be a floating tensor \[2, Tq, 4\]"),
        ((2, 4), (2, 5, 2, 2), {}, r"key must have shape \[batch, 3, height, width\]"),
        ((2, 4), (2, 3, 4), {}, r"key must be a floating tensor \[batch, channels, height"),
        ((2, 4), (2, 3, 2, 2), {"key_mask": torch.ones(2, 3, 2, dtype=torch.bool)},
         r"key_mask must have shape \[2, 2, 2\]"),
        ((2, 4), (2, 3, 2, 2), {"key_mask": torch.ones(2, 2, 2)}, "bool"),
        ((2, 4), (2, 3, 2, 2), {"value": torch.randn(2, 3, 2, 3)}, r"\[2, channels, 2, 2\]"),
        ((2, 4), (2, 3, 2, 2), {"key_lengths": torch.tensor([1, 2])}, "key_mask"),
        ((2, 4), (2, 3, 2, 2), {"causal": True}, "causal"),
    ],
)
def test_bad_input(query, key, kwargs, match):
    att = SpatialAttention(4, 3, 5)
    with pytest.raises(ValueError, match=match):
        att(torch.randn(*query), torch.randn(*key), **kwargs)
