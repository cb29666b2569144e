"""self_attention_max_pool: against a per-head loop in float64 (values) and autograd through that
loop (gradients), gradcheck, masks (empty samples give zeros, never NaN), chunked forward, and
MultiHeadAttention.max_pool against forward + max; max_pool_projected against the loop.

The ``1e-12`` checks run in float64: kernel and loop add the same products in another order,
which costs about 1e-15 at these sizes on any CPU (float64 has no bf16 or AMX path)."""

from __future__ import annotations

import math

import pytest
import torch

import attnkit.attention.pooling as pooling
from attnkit.attention import MultiHeadAttention
from attnkit.attention.pooling import max_pool_projected, self_attention_max_pool


def loop_reference(x, weight, bias, heads, key_mask, query_mask):
    """Head by head, query by query with plain ops: the definition, not the kernel's algebra.

    ``x [b, t, dim]`` -> ``[b, heads * d]``; masked keys get weight 0 (a query without keys
    has a zero context); the max runs over the real queries (zeros without one).
    """
    b, t, _ = x.shape
    d = weight.shape[0] // (3 * heads)
    qkv = x @ weight.T + (0 if bias is None else bias)
    q, k, v = qkv[..., :heads * d], qkv[..., heads * d:2 * heads * d], qkv[..., 2 * heads * d:]
    rows = []
    for i in range(b):
        feats = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            best = None
            for j in range(t):
                if query_mask is not None and not query_mask[i, j]:
                    continue
                s = (k[i, :, cols] @ q[i, j, cols]) / math.sqrt(d)
                if key_mask is not None:
                    s = s.masked_fill(~key_mask[i], -math.inf)
                w = torch.softmax(s, 0).nan_to_num(0.0)
                ctx = w @ v[i, :, cols]
                best = ctx if best is None else torch.maximum(best, ctx)
            feats.append(best if best is not None else x.new_zeros(d))
        rows.append(torch.cat(feats))
    out = torch.stack(rows)
    if key_mask is not None:  # no key anywhere: every context is zero, and so is the max
        out = out * key_mask.any(-1, keepdim=True)
    return out


def _inputs(b=6, t=7, dim=6, heads=2, d=3, bias=True, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, dim, generator=g, dtype=dtype, requires_grad=True)
    w = torch.randn(3 * heads * d, dim, generator=g, dtype=dtype, requires_grad=True)
    bb = torch.randn(3 * heads * d, generator=g, dtype=dtype, requires_grad=True) if bias \
        else None
    return x, w, bb


def _masks(b=6, t=7):
    """Pre-padded lengths 7, 4, 0, 1, 7, 2 (one empty sample, one of a single token)."""
    lengths = torch.tensor([7, 4, 0, 1, 7, 2])[:b]
    key = (torch.arange(t)[None, :] < lengths[:, None]).flip(-1)
    return key, key.clone()


MASKS = {
    "none": lambda: (None, None),
    "padding": _masks,
    "keys only": lambda: (_masks()[0], None),
    "queries only": lambda: (None, _masks()[1]),
}


@pytest.mark.parametrize("masks", list(MASKS))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk", [1 << 19, 1])  # whole batch per head, or one sample a chunk
def test_values_and_gradients_match_the_loop(masks, bias, chunk, monkeypatch):
    monkeypatch.setattr(pooling, "_CHUNK_SCORES", chunk)
    x, w, b = _inputs(bias=bias)
    key_mask, query_mask = MASKS[masks]()
    out = self_attention_max_pool(x, w, b, num_heads=2, key_mask=key_mask,
                                  query_mask=query_mask)
    ref = loop_reference(x, w, b, 2, key_mask, query_mask)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(out)
    params = [p for p in (x, w, b) if p is not None]
    got = torch.autograd.grad(out, params, grad)
    want = torch.autograd.grad(ref, params, grad)
    for name, a, e in zip("xwb", got, want, strict=False):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("masks", ["none", "padding"])
def test_gradcheck(masks, monkeypatch):
    monkeypatch.setattr(pooling, "_CHUNK_SCORES", 2 * 7 * 7)  # two samples per chunk
    x, w, b = _inputs(b=5, t=7, dim=4, heads=2, d=2)
    key_mask, query_mask = MASKS[masks]()
    key_mask = None if key_mask is None else key_mask[:5]
    query_mask = None if query_mask is None else query_mask[:5]
    assert torch.autograd.gradcheck(
        lambda x, w, b: self_attention_max_pool(x, w, b, num_heads=2, key_mask=key_mask,
                                                query_mask=query_mask), (x, w, b))


def test_float32_matches_autograd_through_dense_attention():
    torch.manual_seed(0)
    m = MultiHeadAttention.keras_2018(nb_head=8, size_per_head=16, query_dim=128)
    x = torch.randn(9, 30, 128, requires_grad=True)
    key_mask, _ = _masks(b=6, t=30)
    key_mask = torch.cat([key_mask, torch.ones(3, 30, dtype=torch.bool)])
    fast = m.max_pool(x, key_mask=key_mask, query_mask=key_mask)
    ctx = m(x, x, key_mask=key_mask).context.masked_fill(~key_mask[..., None], -1e30)
    dense = ctx.max(1).values * key_mask.any(-1, keepdim=True)
    torch.testing.assert_close(fast, dense, rtol=1e-5, atol=1e-6)
    g = torch.randn_like(fast)
    a = torch.autograd.grad(fast, [x, m.in_proj_weight], g)
    e = torch.autograd.grad(dense, [x, m.in_proj_weight], g)
    for got, want in zip(a, e, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_empty_samples_give_zeros_and_finite_gradients():
    x, w, b = _inputs(dtype=torch.float32)
    key_mask, query_mask = _masks()
    out = self_attention_max_pool(x, w, b, num_heads=2, key_mask=key_mask,
                                  query_mask=query_mask)
    assert torch.equal(out[2], torch.zeros(6))  # sample 2 has no token
    out.sum().backward()
    for p in (x, w, b):
        assert torch.isfinite(p.grad).all()
    assert torch.equal(x.grad[2], torch.zeros_like(x.grad[2]))
    # every key masked but the queries real: zero contexts, zero pooled
    none = torch.zeros(6, 7, dtype=torch.bool)
    alone = self_attention_max_pool(x, w, b, num_heads=2, key_mask=none)
    assert torch.equal(alone, torch.zeros_like(alone))


def test_empty_batch_and_empty_time():
    w = torch.randn(12, 4, requires_grad=True)
    assert self_attention_max_pool(torch.randn(0, 5, 4), w, num_heads=2).shape == (0, 4)
    out = self_attention_max_pool(torch.randn(3, 0, 4), w, num_heads=2)
    assert torch.equal(out, torch.zeros(3, 4))
    out.sum().backward()
    assert torch.equal(w.grad, torch.zeros_like(w))


def test_bad_inputs():
    x, w = torch.randn(2, 3, 4), torch.randn(12, 4)
    with pytest.raises(ValueError, match=r"x must be \[batch, T, dim\]"):
        self_attention_max_pool(x[0], w, num_heads=2)
    with pytest.raises(ValueError, match="not 3 \\* num_heads"):
        self_attention_max_pool(x, w, num_heads=5)
    with pytest.raises(ValueError, match="bias must be"):
        self_attention_max_pool(x, w, torch.zeros(5), num_heads=2)
    with pytest.raises(ValueError, match="key_mask must be a bool tensor"):
        self_attention_max_pool(x, w, num_heads=2, key_mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="query_mask must be a bool tensor"):
        self_attention_max_pool(x, w, num_heads=2, query_mask=torch.ones(2, 4, dtype=bool))


@pytest.mark.parametrize("kw", [dict(bias=False, out_proj=False), dict(bias=True, out_proj=False),
                                dict(out_proj=True), dict(out_proj=False, rope=True)])
def test_multi_head_max_pool_is_forward_then_max(kw):
    torch.manual_seed(1)
    m = MultiHeadAttention(8, num_heads=2, **kw)
    x = torch.randn(6, 7, 8)
    key_mask, query_mask = _masks()
    pooled = m.max_pool(x, key_mask=key_mask, query_mask=query_mask)
    ctx = m(x, x, key_mask=key_mask).context
    want = ctx.masked_fill(~query_mask[..., None], -math.inf).max(1).values
    want = want.nan_to_num(0.0, neginf=0.0) * query_mask.any(-1, keepdim=True)
    torch.testing.assert_close(pooled, want, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(pooled).all()


def test_under_bf16_autocast_the_kernel_runs_in_bf16_and_grads_reach_float32():
    torch.manual_seed(2)
    m = MultiHeadAttention.keras_2018(nb_head=4, size_per_head=8, query_dim=32)
    x = torch.randn(5, 9, 32, requires_grad=True)
    key_mask, query_mask = _masks(b=5, t=9)
    want = m.max_pool(x, key_mask=key_mask, query_mask=query_mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = m.max_pool(x, key_mask=key_mask, query_mask=query_mask)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, rtol=0.05, atol=0.05)
    # the same as the kernel called on bf16 copies, its gradients cast back to float32
    xb, wb = x.detach().bfloat16().requires_grad_(), m.in_proj_weight.detach().bfloat16()
    wb.requires_grad_()
    plain = self_attention_max_pool(xb, wb, num_heads=4, key_mask=key_mask,
                                    query_mask=query_mask)
    torch.testing.assert_close(got, plain, rtol=0, atol=0)
    g = torch.randn_like(plain)
    grads = torch.autograd.grad(got, [x, m.in_proj_weight], g)
    plain_grads = torch.autograd.grad(plain, [xb, wb], g)
    for a, b in zip(grads, plain_grads, strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b.float(), rtol=0, atol=0)


@pytest.mark.parametrize("masks", list(MASKS))
def test_without_gradients_the_same_values(masks):
    x, w, b = _inputs(dtype=torch.float32)
    key_mask, query_mask = MASKS[masks]()
    kw = dict(num_heads=2, key_mask=key_mask, query_mask=query_mask)
    with_grad = self_attention_max_pool(x, w, b, **kw)
    with torch.no_grad():
        inference = self_attention_max_pool(x, w, b, **kw)
    assert with_grad.requires_grad and not inference.requires_grad
    assert torch.equal(inference, with_grad.detach())


@pytest.mark.parametrize("masks", list(MASKS))
@pytest.mark.parametrize("chunk", [1 << 19, 2 * 7 * 7])
def test_projected_matches_the_loop(masks, chunk, monkeypatch):
    monkeypatch.setattr(pooling, "_CHUNK_SCORES", chunk)
    x, w, b = (t.detach() for t in _inputs())
    key_mask, query_mask = MASKS[masks]()
    qkv = x @ w.T + b
    out = max_pool_projected(qkv, num_heads=2, key_mask=key_mask, query_mask=query_mask)
    ref = loop_reference(x, w, b, 2, key_mask, query_mask)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    if key_mask is not None or query_mask is not None:
        assert torch.equal(out[2], torch.zeros(6))  # sample 2 has no token: zeros, not NaN
    # another scale = queries scaled by (scale * sqrt(d)) under the loop's 1 / sqrt(d)
    scaled = max_pool_projected(qkv, num_heads=2, key_mask=key_mask, query_mask=query_mask,
                                scale=0.3)
    factor = torch.ones(w.shape[0], dtype=w.dtype)
    factor[:6] = 0.3 * math.sqrt(3)
    ref = loop_reference(x, w * factor[:, None], b * factor, 2, key_mask, query_mask)
    torch.testing.assert_close(scaled, ref, rtol=1e-12, atol=1e-12)


def test_projected_refuses_gradients_and_bad_shapes():
    qkv = torch.randn(2, 3, 12, requires_grad=True)
    with pytest.raises(ValueError, match="no gradient"):
        max_pool_projected(qkv, num_heads=2)
    with torch.no_grad():
        assert max_pool_projected(qkv, num_heads=2).shape == (2, 4)
        with pytest.raises(ValueError, match="3 \\* num_heads"):
            max_pool_projected(qkv, num_heads=5)
        with pytest.raises(ValueError, match="key_mask must be a bool tensor"):
            max_pool_projected(qkv, num_heads=2, key_mask=torch.ones(2, 3))
        assert max_pool_projected(qkv[:, :0], num_heads=2).equal(torch.zeros(2, 4))
