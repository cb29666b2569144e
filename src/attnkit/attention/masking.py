"""Masks and the masked softmax every mechanism shares.

Mask convention, everywhere in attnkit: a boolean tensor where **True means "this position is
real / may be attended"** (the convention of ``torch.nn.functional.scaled_dot_product_attention``
and of Keras). False entries get exactly zero weight.

Why not ``scores - 1e9`` or ``-inf``: a large negative constant overflows in float16 and, when
every key of a row is masked, gives *uniform* weights over padding; ``-inf`` gives NaN in that
row, forward and backward. ``masked_softmax`` returns exact zeros for masked entries, an all-zero
row when every entry is masked, and finite gradients in every case.
"""

from __future__ import annotations

import torch
from torch import Tensor


def lengths_to_mask(lengths: Tensor, max_len: int, *, name: str = "lengths") -> Tensor:
    """Turn sequence lengths into a boolean mask.

    Args:
        lengths: integer tensor ``[batch]``, each in ``0..max_len``.
        max_len: the padded time dimension.
        name: used in error messages (e.g. ``"key_lengths"``).

    Returns:
        ``[batch, max_len]`` bool, True at real positions ``t < lengths[b]``.

    Raises:
        ValueError: lengths not 1-D integers, negative, or longer than ``max_len``.
    """
    if not isinstance(lengths, Tensor):
        lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"{name} must have shape [batch], got {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.is_complex():
        raise ValueError(f"{name} must be an integer tensor, got dtype {lengths.dtype}")
    # A compiled graph cannot read values back to check them (each read would cut the graph):
    # the batches a compiled training step gets were checked when they were built.
    if lengths.numel() and not torch.compiler.is_compiling() and (
            int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        raise ValueError(
            f"{name} must lie in 0..{max_len} (the padded time dimension), "
            f"got min {int(lengths.min())} and max {int(lengths.max())}"
        )
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None,
                offset: int = 0) -> Tensor:
    """``[query_len, key_len]`` bool, True where key ``j <= i + offset`` for query ``i``.

    With ``offset=0``, top-left aligned, exactly like ``scaled_dot_product_attention(...,
    is_causal=True)``. Incremental decoding passes ``offset`` = the positions already cached:
    new query ``i`` is position ``offset + i`` and sees every cached key and the new ones up to
    itself.
    """
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(offset)


def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` that gives exact zeros where ``mask`` is False.

    Math: ``w_i = m_i exp(s_i - max_j s_j) / sum_j m_j exp(s_j - max_j s_j)``, with ``0/0 := 0``
    (a row with every entry masked is all zeros).

    Args:
        scores: any floating tensor, e.g. ``[batch, heads, Tq, Tk]``.
        mask: bool tensor broadcastable to ``scores``; True = may be attended. None = no mask.
        dim: the dimension normalised over.

    Returns:
        Weights with the shape and dtype of ``scores``. Half-precision inputs are normalised in
        float32 and cast back, so bfloat16/float16 rows still sum to 1 to their precision.
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
