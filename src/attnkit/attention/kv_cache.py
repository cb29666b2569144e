"""What incremental decoding keeps between steps: key/value storage, no attention arithmetic.

`KeyValueCache` holds the self-attention keys/values in preallocated `GrowingBuffer` s;
`SourceKeyValues` the cross-attention keys/values of the source, projected once per sentence.
Both are values the decoding state carries, never module state (docs/concepts.md,
"Incremental decoding").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.attention.base import select_rows


class GrowingBuffer:
    """A tensor of rows ``data [rows, ..., capacity, ...]`` that grows along ``dim``, in place:
    ``length`` positions filled, doubling when full; reordering rows copies only the filled ones.
    """

    def __init__(self, data: Tensor, dim: int, length: int = 0):
        if dim < 1:
            raise ValueError(f"dim must be >= 1 (rows are dimension 0), got {dim}")
        self.data, self.dim, self.length = data, dim, length

    @property
    def capacity(self) -> int:
        return self.data.shape[self.dim]

    def filled(self) -> Tensor:
        """A view of the filled positions."""
        return self.data.narrow(self.dim, 0, self.length)

    def append(self, x: Tensor) -> Tensor:
        """Write ``x`` (the buffer's shape with ``t`` positions along ``dim``) after the filled
        positions; returns the view of every filled position."""
        start, end = self.length, self.length + x.shape[self.dim]
        if end > self.capacity:
            self._resize(self.data.shape[0], max(end, 2 * self.capacity))
        self.data.narrow(self.dim, start, end - start).copy_(x)
        self.length = end
        return self.filled()

    def reorder(self, rows: Tensor) -> None:
        """Keep rows ``rows [new_rows]`` (with repeats), copying only the filled positions."""
        old = self.filled()
        self._resize(rows.shape[0], self.capacity, copy=False)
        # index_select writes into the filled part of the new storage (a strided view).
        torch.index_select(old, 0, rows, out=self.filled())

    def _resize(self, rows: int, capacity: int, copy: bool = True) -> None:
        shape = list(self.data.shape)
        shape[0], shape[self.dim] = rows, capacity
        old, self.data = self.filled(), self.data.new_empty(shape)
        if copy:
            self.filled().copy_(old)


@dataclass
class KeyValueCache:
    """Self-attention keys and values so far: ``[rows, heads, capacity, head_dim]`` buffers."""

    keys: GrowingBuffer
    values: GrowingBuffer

    @classmethod
    def empty(cls, rows: int, heads: int, head_dim: int, capacity: int,
              like: Tensor) -> KeyValueCache:
        """Room for ``capacity`` positions, in the dtype and device of ``like``."""
        shape = (rows, heads, max(capacity, 1), head_dim)
        return cls(GrowingBuffer(like.new_empty(shape), 2), GrowingBuffer(like.new_empty(shape), 2))

    @property
    def length(self) -> int:
        """How many positions are filled."""
        return self.keys.length

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Write ``keys, values [rows, heads, t, head_dim]``; views of every filled position."""
        return self.keys.append(keys), self.values.append(values)

    def reorder(self, rows: Tensor) -> None:
        """Keep rows ``rows [new_rows]`` (beam parents, or the sentences not finished)."""
        self.keys.reorder(rows)
        self.values.reorder(rows)


@dataclass
class SourceKeyValues:
    """Cross-attention ``keys, values [sentences, heads, S, head_dim]`` of the source; ``mask
    [sentences, 1, 1, S]`` (True = real) or None when no sentence is padded; ``empty
    [sentences, 1, 1, 1]``, True for a sentence without a source position, or None.
    """

    keys: Tensor
    values: Tensor
    mask: Tensor | None
    empty: Tensor | None

    def select(self, sentences: Tensor) -> SourceKeyValues:
        """Keep the sentences ``sentences [new_sentences]`` (the others are finished)."""
        return select_rows(self, sentences)
