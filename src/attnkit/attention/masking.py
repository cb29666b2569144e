"""Masks and the masked softmax every mechanism shares.

True means "this position is real / may be attended", everywhere (as SDPA and Keras). Masked
entries get exact zeros, an all-masked row is all zeros, and gradients stay finite, where
``-1e9`` overflows in float16 and gives uniform weights over padding and ``-inf`` gives NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor


def lengths_to_mask(lengths: Tensor, max_len: int, *, name: str = "lengths") -> Tensor:
    """``lengths [batch]`` -> ``[batch, max_len]`` bool, True at ``t < lengths[b]``.

    Raises:
        ValueError: lengths not 1-D integers, negative, or longer than ``max_len`` (``name`` in
            the message).
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"{name} must have shape [batch], got {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.is_complex():
        raise ValueError(f"{name} must be an integer tensor, got dtype {lengths.dtype}")
    # A compiled graph cannot read values back to check them (each read would cut the graph):
    # the batches a compiled training step gets were checked when they were built.
    if lengths.numel() and not torch.compiler.is_compiling() and (
            int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        raise ValueError(f"{name} must lie in 0..{max_len} (the padded time dimension), "
                         f"got min {int(lengths.min())} and max {int(lengths.max())}")
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None,
                offset: int = 0) -> Tensor:
    """``[query_len, key_len]`` bool, True where key ``j <= i + offset`` for query ``i``.

    ``offset=0`` is SDPA's ``is_causal``; incremental decoding passes the positions cached.
    """
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(offset)


def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` with exact zeros where ``mask`` (broadcastable; True = may attend) is
    False; an all-masked row is all zeros.

    Half-precision ``scores`` are normalised in float32 and cast back.
    """
    compute_dtype = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else None
    if mask is None:
        return torch.softmax(scores, dim=dim, dtype=compute_dtype).to(scores.dtype)
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got dtype {mask.dtype}")
    work = scores.to(compute_dtype) if compute_dtype is not None else scores
    # finfo.min (not -inf): an all-masked row stays finite, so its gradient is finite too.
    filled = work.masked_fill(~mask, torch.finfo(work.dtype).min)
    weights = torch.softmax(filled, dim=dim)
    # Multiplying by the mask zeroes the all-masked rows (uniform after the fill) exactly.
    weights = weights * mask
    return weights.to(scores.dtype)
