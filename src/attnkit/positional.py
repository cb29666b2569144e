"""Position information for attention models: sinusoidal, learned and rotary.

`SinusoidalPositionalEncoding` (fixed; Vaswani's interleaved layout or the 2018 Keras
``Position_Embedding``'s cosines-then-sines), `LearnedPositionalEmbedding` (one trained vector
per position) and `RotaryEmbedding` (RoPE, Su et al. 2021, rotate-half convention). Every
module is batch-first and keeps no per-call state.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _check_even(dim: int, what: str) -> None:
    if dim <= 0 or dim % 2:
        raise ValueError(f"{what} must be a positive even number (pairs of sin/cos), got {dim}")


def inverse_frequencies(dim: int, base: float = 10000.0, device=None) -> Tensor:
    """``[dim // 2]`` float32: ``1 / base^(2i / dim)`` for ``i = 0 .. dim/2 - 1``."""
    _check_even(dim, "dim")
    i = torch.arange(dim // 2, dtype=torch.float32, device=device)
    return 1.0 / (base ** (2.0 * i / dim))


class _AddedPositions(nn.Module):
    """A subclass's table ``encoding(length, offset, device, dtype) -> [length, dim]`` summed
    with (``mode="sum"``) or concatenated to ``x [batch, time, d]``, from position ``offset``."""

    def __init__(self, dim: int, mode: str):
        super().__init__()
        if mode not in ("sum", "concat"):
            raise ValueError(f"mode must be 'sum' or 'concat', got {mode!r}")
        self.dim, self.mode = dim, mode

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() != 3:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape [batch, time, dim], got {shape}")
        if self.mode == "sum" and x.shape[-1] != self.dim:
            raise ValueError(f"mode='sum' needs x of shape [batch, time, {self.dim}], "
                             f"got {tuple(x.shape)}")
        pe = self.encoding(x.shape[1], offset, x.device, x.dtype)
        if self.mode == "sum":
            return x + pe
        return torch.cat([x, pe.expand(x.shape[0], -1, -1)], dim=-1)


class SinusoidalPositionalEncoding(_AddedPositions):
    """Fixed sinusoidal position encoding, summed with or concatenated to the input.

    With ``w_i = 1 / base^(2i/dim)``: ``layout="interleaved"`` is ``PE[t, 2i] = sin(t w_i)``,
    ``PE[t, 2i+1] = cos(t w_i)``; ``"cos_sin"`` is ``PE[t, i] = cos(t w_i)``, ``PE[t, dim/2 + i] =
    sin(t w_i)`` (the Keras 2018 layer, which concatenates ``[PE, x]``; attnkit always ``[x, PE]``).

    Example:
        >>> pe = SinusoidalPositionalEncoding(8, mode="concat", layout="cos_sin")
        >>> pe(torch.zeros(2, 5, 3)).shape
        torch.Size([2, 5, 11])
    """

    def __init__(self, dim: int, mode: str = "sum", layout: str = "interleaved",
                 base: float = 10000.0):
        _check_even(dim, "dim")
        super().__init__(dim, mode)
        if layout not in ("interleaved", "cos_sin"):
            raise ValueError(f"layout must be 'interleaved' or 'cos_sin', got {layout!r}")
        self.layout, self.base = layout, float(base)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, mode={self.mode!r}, layout={self.layout!r}, base={self.base}"

    def encoding(self, length: int, offset: int = 0, device=None,
                 dtype: torch.dtype | None = torch.float32) -> Tensor:
        """The table ``[length, dim]`` for positions ``offset .. offset + length - 1``."""
        # Angles in float32 (float64 would not help: sin/cos of large t are fine to ~1e-7).
        t = torch.arange(offset, offset + length, dtype=torch.float32, device=device)
        angles = t[:, None] * inverse_frequencies(self.dim, self.base, device)[None, :]
        if self.layout == "cos_sin":
            pe = torch.cat([angles.cos(), angles.sin()], dim=-1)
        else:
            pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
        return pe.to(dtype)


class LearnedPositionalEmbedding(_AddedPositions):
    """A trained vector per position ``0 .. max_len - 1``, summed (``mode="sum"``) or concatenated.

    ``forward(x [batch, time, d], offset=0)`` -> ``[batch, time, d]`` or ``[batch, time, d + dim]``.

    Example:
        >>> LearnedPositionalEmbedding(100, 16)(torch.zeros(2, 10, 16)).shape
        torch.Size([2, 10, 16])
    """

    def __init__(self, max_len: int, dim: int, mode: str = "sum"):
        if max_len <= 0 or dim <= 0:
            raise ValueError(f"max_len and dim must be positive, got {max_len} and {dim}")
        super().__init__(dim, mode)
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, dim))
        # Small init (as GPT-2): N(0, 1) positions would swamp the token embeddings at the start.
        nn.init.normal_(self.weight, std=0.02)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, mode={self.mode!r}"

    def encoding(self, length: int, offset: int = 0, device=None,
                 dtype: torch.dtype | None = None) -> Tensor:
        """The table ``[length, dim]`` for positions ``offset .. offset + length - 1``."""
        if offset < 0 or offset + length > self.max_len:
            raise ValueError(f"positions {offset}..{offset + length - 1} do not fit max_len="
                             f"{self.max_len}: input [batch, time, d] has time={length}")
        return self.weight[offset:offset + length].to(device=device, dtype=dtype)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE), rotate-half / GPT-NeoX convention.

    Feature ``i`` pairs with ``i + dim/2``, rotated by ``t * w_i``, ``w_i = 1 / base^(2i/dim)``:
    ``x * cos(t w) + rotate_half(x) * sin(t w)``, so ``<rotate(q, m), rotate(k, n)>`` depends only
    on ``m - n``. ``forward(x [batch, heads, time, dim], positions=None)`` (positions
    ``[time]`` or ``[batch, time]``, default ``0 .. time-1``) -> the same shape.

    Example:
        >>> RotaryEmbedding(8)(torch.randn(2, 4, 5, 8)).shape
        torch.Size([2, 4, 5, 8])
    """

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        _check_even(dim, "dim")
        self.dim, self.base = dim, float(base)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}"

    def forward(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """Rotate ``x [batch, heads, time, dim]`` at ``positions [time]`` or ``[batch, time]``."""
        if x.dim() != 4 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape [batch, heads, time, {self.dim}], "
                             f"got {tuple(x.shape)}")
        batch, time = x.shape[0], x.shape[2]
        if positions is None:
            positions = torch.arange(time, device=x.device)
        elif tuple(positions.shape) not in ((time,), (batch, time)):
            raise ValueError(f"positions must have shape [{time}] or [{batch}, {time}], "
                             f"got {tuple(positions.shape)}")
        freqs = inverse_frequencies(self.dim, self.base, positions.device)
        angles = positions.to(torch.float32)[..., None] * freqs
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if cos.dim() == 3:  # per-batch positions: [batch, time, dim] -> [batch, 1, time, dim]
            cos, sin = cos[:, None], sin[:, None]
        half = self.dim // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
