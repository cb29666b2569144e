"""attnkit.attention.create builds each kind; the result behaves as its class."""

import pytest
import torch

from attnkit.attention import (
    AdditiveAttention,
    ConcatAttention,
    DotProductAttention,
    GeneralAttention,
    LocalAttention,
    ScoreAttention,
    create,
)


@pytest.mark.parametrize(
    "kind, cls",
    [("dot", DotProductAttention), ("scaled_dot", DotProductAttention),
     ("general", GeneralAttention), ("additive", AdditiveAttention),
     ("bahdanau", AdditiveAttention), ("concat", ConcatAttention),
     ("local-m", LocalAttention), ("local-p", LocalAttention)],
)
def test_each_kind_builds_and_runs(kind, cls):
    att = create(kind, 6, 6, units=5, window=2)
    assert isinstance(att, cls) and isinstance(att, ScoreAttention)
    out = att(torch.randn(2, 3, 6), torch.randn(2, 4, 6), key_lengths=torch.tensor([4, 2]),
              need_weights=True)
    assert out.context.shape == (2, 3, 6) and out.weights.shape == (2, 3, 4)
    assert (out.weights[1, :, 2:] == 0).all()


def test_dot_kinds_scale_as_named():
    q, k = torch.randn(1, 2, 4), torch.randn(1, 3, 4)
    w_dot = create("dot", 4, 4)(q, k, need_weights=True).weights
    w_scaled = create("scaled_dot", 4, 4)(q, k, need_weights=True).weights
    torch.testing.assert_close(w_dot, torch.softmax(q @ k.transpose(1, 2), -1))
    torch.testing.assert_close(w_scaled, torch.softmax(q @ k.transpose(1, 2) / 2.0, -1))


def test_options_reach_the_mechanism():
    att = create("additive", 3, 4, units=7, memory_budget_mb=1.0)
    assert att.units == 7 and att.memory_budget_mb == 1.0 and att.key_proj.bias is not None
    assert create("additive", 3, 4).units == 4  # default units = key_dim
    local = create("local-p", 3, 4, window=3, score="concat", units=8, renormalize=True)
    assert isinstance(local.inner, ConcatAttention) and local.inner.units == 8
    assert local.mode == "predictive" and local.renormalize and local.window == 3
    assert local.position_proj.out_features == 8
    assert isinstance(create("local-m", 3, 4, window=1).inner, GeneralAttention)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("dot", 3, 4), {}, "query_dim == key_dim"),
        (("scaled_dot", 4, 3), {}, "query_dim == key_dim"),
        (("local-m", 3, 3), {}, "window"),
        (("luong", 3, 3), {}, "unknown attention kind 'luong'"),
        (("local-m", 3, 3), {"window": 1, "score": "local-p"}, "cannot be"),
    ],
)
def test_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        create(*args, **kwargs)
