"""Attention kernel benchmark: attnkit against baselines timed in the same run.

Run: ``.venv/bin/python benchmarks/attention_kernels.py [--quick] [--rounds N]``

Prints one table. Each row times an attnkit call and a baseline call interleaved round by round
(A, B, A, B, ...) after one warm-up each, and reports the medians and ``ratio = attnkit /
baseline`` for time and peak memory (< 1 means attnkit is faster / smaller).

Peak memory (CPU): the increase of the process's peak resident set (``VmHWM`` in
``/proc/self/status``) during one call, after resetting the peak with ``/proc/self/clear_refs``
(``5``). glibc is told (``mallopt(M_MMAP_THRESHOLD, 64 KiB)``) to serve every allocation above
64 KiB with its own ``mmap`` and return it to the system on free, so that freed tensors do not
hide in the heap and each measurement sees the real high-water mark of that call (inputs, which
exist before the reset, are not counted; gradients and saved activations are). Where the kernel
does not offer ``clear_refs`` the memory columns read ``n/a``.

Rows:
* MHA (batch, T, heads, head_dim): attnkit ``MultiHeadAttention`` self-attention against
  ``torch.nn.MultiheadAttention`` (batch_first, same weights) in training mode forward+backward
  and in eval mode under ``no_grad`` (``need_weights=False``: PyTorch's fused native path; and
  PyTorch's default ``need_weights=True``), and against a naive matmul-softmax-matmul MHA.
* op: ``DotProductAttention`` (key_lengths mask, ``[batch*heads, T, head_dim]``, everything
  included: checks, mask building, empty-row guard) against bare ``scaled_dot_product_attention``
  on the same data as ``[batch*heads, 1, T, head_dim]`` (its fused kernel) with the mask prebuilt.
* additive (batch, Tq, Tk, units): ``AdditiveAttention`` against the naive broadcast form
  ``v^T tanh(W_q q[:, :, None] + W_k k[:, None])``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attnkit.attention.additive import AdditiveAttention  # noqa: E402
from attnkit.attention.base import build_mask  # noqa: E402
from attnkit.attention.dot_product import DotProductAttention  # noqa: E402
from attnkit.attention.multi_head import MultiHeadAttention  # noqa: E402
from attnkit.machine import machine_line  # noqa: E402

MHA_SHAPES = [(64, 100, 8, 16), (32, 512, 8, 64), (4, 4096, 8, 64)]
ADD_SHAPES = [(64, 1, 20, 256), (64, 20, 20, 256), (8, 512, 512, 256)]
QUICK_MHA = [(8, 64, 4, 16), (4, 256, 8, 32)]
QUICK_ADD = [(16, 1, 20, 64), (8, 64, 64, 64)]


# --- peak memory ------------------------------------------------------------------------------

def _setup_malloc() -> bool:
    """Fixed mmap threshold, so freed large blocks leave the RSS; True if clear_refs works."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD = -3; also disables the dynamic threshold
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def peak_mib(fn: Callable[[], object], enabled: bool) -> float:
    """Peak RSS increase (MiB) while ``fn`` runs."""
    if not enabled:
        return math.nan
    gc.collect()
    base = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    fn()
    return (_status_kib("VmHWM") - base) / 1024.0


# --- timing -----------------------------------------------------------------------------------

def compare(fa: Callable[[], object], fb: Callable[[], object], rounds: int,
            mem: bool) -> tuple[float, float, float, float]:
    """Median seconds of ``fa`` and ``fb`` interleaved round by round, and their peak MiB."""
    fa(), fb()  # warm-up (thread pools, kernel selection)
    ta, tb = [], []
    for _ in range(rounds):
        for fn, acc in ((fa, ta), (fb, tb)):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t0)
    return (statistics.median(ta), statistics.median(tb), peak_mib(fa, mem), peak_mib(fb, mem))


def _finite(t: Tensor) -> Tensor:
    if not torch.isfinite(t).all():
        raise RuntimeError("non-finite output in benchmark")
    return t


def fwd_bwd(fn: Callable[[], Tensor], grad: Tensor, params: list[Tensor]) -> Callable[[], None]:
    def run() -> None:
        for p in params:
            p.grad = None
        out = fn()
        out.backward(grad)
        _finite(out.detach())
        for p in params:
            p.grad = None
    return run


def fwd_eval(fn: Callable[[], Tensor]) -> Callable[[], None]:
    def run() -> None:
        with torch.no_grad():
            _finite(fn())
    return run


# --- baselines --------------------------------------------------------------------------------

def naive_mha(x: Tensor, m: MultiHeadAttention) -> Tensor:
    """Matmul-softmax-matmul MHA with the weights of ``m`` (keeps the [B, H, T, T] matrix)."""
    b, t, _ = x.shape
    q, k, v = F.linear(x, m.in_proj_weight, m.in_proj_bias).chunk(3, dim=-1)
    q, k, v = (z.reshape(b, t, m.num_heads, m.head_dim).transpose(1, 2) for z in (q, k, v))
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(m.head_dim), dim=-1)
    return m.out_proj((w @ v).transpose(1, 2).reshape(b, t, m.inner_dim))


def naive_additive(q: Tensor, k: Tensor, a: AdditiveAttention) -> Tensor:
    """``softmax(v^T tanh(W_q q[:, :, None] + W_k k[:, None])) k`` (the [B, Tq, Tk, U] form)."""
    s = torch.tanh(a.query_proj(q)[:, :, None] + a.key_proj(k)[:, None]) @ a.v
    return torch.bmm(torch.softmax(s, dim=-1), k)


# --- rows -------------------------------------------------------------------------------------

def mha_rows(shape, rounds, mem):
    b, t, h, d = shape
    e = h * d
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(e, h, batch_first=True)
    ours = MultiHeadAttention.from_torch(ref)
    x = torch.randn(b, t, e, requires_grad=True)
    g = torch.randn(b, t, e)
    p_ours, p_ref = [*ours.parameters(), x], [*ref.parameters(), x]
    tag = f"({b},{t},{h},{d})"
    ours.train(), ref.train()
    yield (f"MHA {tag}", "fwd+bwd train", "nn.MultiheadAttention", "<= 1.05x time",
           compare(fwd_bwd(lambda: ours(x, x, x).context, g, p_ours),
                   fwd_bwd(lambda: ref(x, x, x, need_weights=False)[0], g, p_ref),
                   rounds, mem))
    yield (f"MHA {tag}", "fwd+bwd train", "naive matmul-softmax", "",
           compare(fwd_bwd(lambda: ours(x, x, x).context, g, p_ours),
                   fwd_bwd(lambda: naive_mha(x, ours), g, p_ours), rounds, mem))
    ours.eval(), ref.eval()
    xe = x.detach()
    yield (f"MHA {tag}", "fwd eval no_grad", "nn.MHA need_weights=False", "",
           compare(fwd_eval(lambda: ours(xe, xe, xe).context),
                   fwd_eval(lambda: ref(xe, xe, xe, need_weights=False)[0]), rounds, mem))
    yield (f"MHA {tag}", "fwd eval no_grad", "nn.MHA default (weights)",
           ">= 2x faster at T=4096" if t == 4096 else "",
           compare(fwd_eval(lambda: ours(xe, xe, xe).context),
                   fwd_eval(lambda: ref(xe, xe, xe)[0]), rounds, mem))
    yield (f"MHA {tag}", "fwd eval no_grad", "naive matmul-softmax", "",
           compare(fwd_eval(lambda: ours(xe, xe, xe).context),
                   fwd_eval(lambda: naive_mha(xe, ours)), rounds, mem))
    # The attention op alone, on [batch*heads, T, head_dim], with a key padding mask.
    op = DotProductAttention()
    q, k, v = (torch.randn(b * h, t, d, requires_grad=True) for _ in range(3))
    lengths = torch.randint(t // 2, t + 1, (b * h,))
    mask = build_mask(b * h, t, t, key_lengths=lengths)
    go = torch.randn(b * h, t, d)

    def bare() -> Tensor:  # SDPA at its best: 4-D inputs (fused CPU kernel), mask prebuilt
        return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None],
                                              attn_mask=mask[:, None])[:, 0]

    yield (f"op {tag}", "fwd no_grad", "bare SDPA, same mask", "<= 1.05x time",
           compare(fwd_eval(lambda: op(q, k, v, key_lengths=lengths).context), fwd_eval(bare),
                   rounds, mem))
    yield (f"op {tag}", "fwd+bwd", "bare SDPA, same mask", "<= 1.05x time",
           compare(fwd_bwd(lambda: op(q, k, v, key_lengths=lengths).context, go, [q, k, v]),
                   fwd_bwd(bare, go, [q, k, v]), rounds, mem))


def additive_rows(shape, rounds, mem):
    b, tq, tk, u = shape
    torch.manual_seed(0)
    att = AdditiveAttention(u, u, u)
    q = torch.randn(b, tq, u, requires_grad=True)
    k = torch.randn(b, tk, u, requires_grad=True)
    g = torch.randn(b, tq, u)
    params = [*att.parameters(), q, k]
    tag = f"({b},{tq},{tk},{u})"
    yield (f"additive {tag}", "fwd no_grad", "naive broadcast", "mem <= 1/8, time <= 1.0x",
           compare(fwd_eval(lambda: att(q, k).context),
                   fwd_eval(lambda: naive_additive(q, k, att)), rounds, mem))
    yield (f"additive {tag}", "fwd+bwd", "naive broadcast", "mem <= 1/4, time <= 1.2x",
           compare(fwd_bwd(lambda: att(q, k).context, g, params),
                   fwd_bwd(lambda: naive_additive(q, k, att), g, params), rounds, mem))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes, a smoke run (< 60 s)")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds per row")
    args = ap.parse_args(argv)
    mem = _setup_malloc()
    rounds = args.rounds or (3 if args.quick else 5)
    mha_shapes, add_shapes = (QUICK_MHA, QUICK_ADD) if args.quick else (MHA_SHAPES, ADD_SHAPES)
    print(f"machine: {machine_line()}")
    print(f"{rounds} rounds, median; ratio = attnkit / baseline; memory = peak RSS increase "
          "(MiB)")
    head = (f"{'case':<24} {'mode':<17} {'baseline':<26} {'ours ms':>9} {'base ms':>9} "
            f"{'time x':>7} {'ours MiB':>9} {'base MiB':>9} {'mem x':>6}  target")
    print(head)
    print("-" * len(head))
    rows = [r for s in mha_shapes for r in [mha_rows(s, rounds, mem)]]
    rows += [r for s in add_shapes for r in [additive_rows(s, rounds, mem)]]
    # Rows are generators: each prints as soon as it is measured.
    for case, mode, base, target, (ta, tb, ma, mb) in (r for gen in rows for r in gen):
        mem_ratio = ma / mb if mb > 0 else math.nan
        print(f"{case:<24} {mode:<17} {base:<26} {ta * 1e3:9.2f} {tb * 1e3:9.2f} "
              f"{ta / tb:7.3f} {ma:9.1f} {mb:9.1f} {mem_ratio:6.3f}  {target}", flush=True)


if __name__ == "__main__":
    main()
