"""The one interface every attnkit attention mechanism implements.

``forward(query, key, value=None, *, key_lengths=None, key_mask=None, query_lengths=None,
attn_mask=None, causal=False, need_weights=False) -> AttentionOutput(context, weights)``,
batch-first shapes. Masks are True = real / may be attended and are combined with AND; a query
left with no key gets zero weights and a zero context, never NaN (docs/concepts.md, "One call
signature" and "Masks: one convention"). Modules keep no per-call state.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnkit.attention.masking import causal_mask, lengths_to_mask, masked_softmax


class AttentionOutput(NamedTuple):
    """``context [batch, Tq, out_dim]`` and, with ``need_weights=True``, ``weights [batch, Tq,
    Tk]`` (``[batch, heads, Tq, Tk]`` multi-head, ``[batch, Tq, H, W]`` spatial), else None."""

    context: Tensor
    weights: Tensor | None


def _shape(t: Tensor | None) -> tuple[int, ...] | None:
    return None if t is None else tuple(t.shape)


def check_inputs(query: Tensor | None, key: Tensor, value: Tensor, *, query_dim: int | None = None,
                 key_dim: int | None = None, value_dim: int | None = None) -> None:
    """Raise a ValueError naming the expected shapes when query/key/value do not fit (None: any;
    a None ``query`` is not checked)."""
    named = [("key", key, key_dim), ("value", value, value_dim)]
    if query is not None:
        named.insert(0, ("query", query, query_dim))
    for name, t, _ in named:
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(f"{name} must have shape [batch, time, dim], got {_shape(t)}")
        if not t.dtype.is_floating_point:
            raise ValueError(f"{name} must be a floating tensor, got dtype {t.dtype}")
    # Compared one by one, not as a set: hashing a traced size would fix the batch size of a
    # compiled step (one graph per batch size).
    if any(t.shape[0] != key.shape[0] for _, t, _ in named):
        raise ValueError("batch sizes differ: " + ", ".join(f"{n} {_shape(t)}"
                                                             for n, t, _ in named))
    if key.shape[1] != value.shape[1]:
        raise ValueError(f"key and value must have the same time length: key {_shape(key)}, "
                         f"value {_shape(value)}")
    for name, t, dim in named:
        if dim is not None and t.shape[-1] != dim:
            raise ValueError(f"{name} must have shape [batch, time, {dim}], got {_shape(t)}")


def build_mask(batch: int, query_len: int, key_len: int, *, key_lengths: Tensor | None = None,
               key_mask: Tensor | None = None, attn_mask: Tensor | None = None,
               causal: bool = False, num_heads: int | None = None,
               device: torch.device | None = None) -> Tensor | None:
    """Every key-side mask combined (True = may attend), broadcastable to ``[batch, Tq, Tk]``
    (``[batch, heads or 1, Tq, Tk]`` when ``num_heads`` is given), or None.
    """
    parts: list[Tensor] = []
    if key_lengths is not None:
        if key_lengths.dim() != 1 or key_lengths.shape[0] != batch:
            raise ValueError(f"key_lengths must have shape [{batch}], got {_shape(key_lengths)}")
        parts.append(lengths_to_mask(key_lengths.to(device), key_len, name="key_lengths")[:, None])
    if key_mask is not None:
        if key_mask.dtype != torch.bool:
            raise ValueError(
                f"key_mask must be a bool tensor (True = real key), got dtype {key_mask.dtype}")
        if tuple(key_mask.shape) != (batch, key_len):
            raise ValueError(f"key_mask must have shape [{batch}, {key_len}], "
                             f"got {_shape(key_mask)}")
        parts.append(key_mask.to(device)[:, None])
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            raise ValueError(
                f"attn_mask must be a bool tensor (True = may attend), got dtype {attn_mask.dtype}")
        allowed = [(query_len, key_len), (batch, query_len, key_len)]
        if num_heads is not None:
            allowed += [(batch, num_heads, query_len, key_len), (batch, 1, query_len, key_len)]
        if tuple(attn_mask.shape) not in allowed:
            names = " or ".join(str(list(s)) for s in allowed)
            raise ValueError(f"attn_mask must have shape {names}, got {_shape(attn_mask)}")
        m = attn_mask.to(device)
        parts.append(m[None] if m.dim() == 2 else m)
    if causal:
        parts.append(causal_mask(query_len, key_len, device)[None])
    if not parts:
        return None
    if num_heads is not None:
        parts = [p if p.dim() == 4 else p[:, None] for p in parts]
    mask = parts[0]
    for p in parts[1:]:
        mask = mask & p
    return mask


def query_mask_from_lengths(query_lengths: Tensor | None, batch: int, query_len: int,
                            device: torch.device | None = None) -> Tensor | None:
    """``[batch, Tq]`` bool (True = real query) from ``query_lengths``, or None."""
    if query_lengths is None:
        return None
    if query_lengths.dim() != 1 or query_lengths.shape[0] != batch:
        raise ValueError(f"query_lengths must have shape [{batch}], got {_shape(query_lengths)}")
    return lengths_to_mask(query_lengths.to(device), query_len, name="query_lengths")


def select_rows(value: Any, index: Tensor) -> Any:
    """A dataclass like ``value`` with rows ``index`` of its tensor fields (others kept)."""
    return type(value)(*(v.index_select(0, index) if isinstance(v, Tensor) else v
                         for v in (getattr(value, f.name) for f in fields(value))))


@dataclass
class AttentionMemory:
    """What a mechanism precomputes once per source and reuses at every decoder step: ``keys``
    as the score needs them ``[batch, Tk, *]`` (e.g. ``W_k k``), ``values [batch, Tk,
    value_dim]``, ``key_mask [batch, Tk]`` (True = real key) or None, ``raw_keys`` as given.
    """

    keys: Tensor
    values: Tensor
    key_mask: Tensor | None
    raw_keys: Tensor

    def reorder(self, index: Tensor) -> AttentionMemory:
        """Select batch rows (beam search): ``index [new_batch]`` into the batch dimension."""
        return select_rows(self, index)


class TwoStepAttention(nn.Module):
    """A mechanism in two steps: ``memory(key, value, *, key_lengths, key_mask)`` once per
    source, ``attend(query, memory, **options)`` for each query; ``forward`` is both, with the
    common call signature (a mechanism's own options pass to ``attend``).
    """

    def forward(self, query: Tensor, key: Tensor, value: Tensor | None = None, *,
                key_lengths: Tensor | None = None, key_mask: Tensor | None = None,
                **options: Any) -> AttentionOutput:
        memory = self.memory(key, value, key_lengths=key_lengths, key_mask=key_mask)
        return self.attend(query, memory, **options)


class ScoreAttention(TwoStepAttention):
    """Base for mechanisms defined by a score ``score(q_i, k_j)``: subclasses implement
    `score_projected` (and `project_keys` for the part that depends on the keys alone).

    Example:
        ```python
        memory = attention.memory(encoder_out, key_lengths=source_lengths)  # once
        out = attention.attend(decoder_state, memory, need_weights=True)     # every step
        ```
    """

    query_dim: int | None = None
    key_dim: int | None = None

    def project_keys(self, key: Tensor) -> Tensor:
        """``key [batch, Tk, key_dim]`` -> the key-only part of the score (default: ``key``)."""
        return key

    def score_projected(self, query: Tensor, keys: Tensor) -> Tensor:  # pragma: no cover
        """``query [batch, Tq, query_dim]``, projected ``keys`` -> scores ``[batch, Tq, Tk]``."""
        raise NotImplementedError

    def score(self, query: Tensor, key: Tensor) -> Tensor:
        """Scores ``[batch, Tq, Tk]`` for raw ``query`` and ``key``."""
        return self.score_projected(query, self.project_keys(key))

    def memory(self, key: Tensor, value: Tensor | None = None, *,
               key_lengths: Tensor | None = None,
               key_mask: Tensor | None = None) -> AttentionMemory:
        """Precompute what does not depend on the query. ``key [batch, Tk, key_dim]``."""
        value = key if value is None else value
        check_inputs(None, key, value, key_dim=self.key_dim)
        mask = build_mask(key.shape[0], 1, key.shape[1], key_lengths=key_lengths,
                          key_mask=key_mask, device=key.device)
        return AttentionMemory(self.project_keys(key), value,
                               None if mask is None else mask[:, 0], key)

    def attend(self, query: Tensor, memory: AttentionMemory, *,
               query_lengths: Tensor | None = None, attn_mask: Tensor | None = None,
               causal: bool = False, need_weights: bool = False,
               **options: Any) -> AttentionOutput:
        """Attend from ``query [batch, Tq, query_dim]`` over ``memory``: the mask, the weights
        (`distribution`), the context (`read`)."""
        check_inputs(query, memory.raw_keys, memory.values, query_dim=self.query_dim)
        batch, tq, tk = query.shape[0], query.shape[1], memory.values.shape[1]
        mask = build_mask(batch, tq, tk, key_mask=memory.key_mask, attn_mask=attn_mask,
                          causal=causal, device=query.device)
        weights = self.distribution(query, memory, mask, **options)
        return self.read(weights, memory, query_lengths, need_weights)

    def distribution(self, query: Tensor, memory: AttentionMemory,
                     mask: Tensor | None) -> Tensor:
        """The weights ``[batch, Tq, Tk]``: the masked softmax of the scores."""
        return masked_softmax(self.score_projected(query, memory.keys), mask)

    def read(self, weights: Tensor, memory: AttentionMemory, query_lengths: Tensor | None,
             need_weights: bool) -> AttentionOutput:
        """``context = weights @ values``; the rows of padded queries are zeroed first."""
        qmask = query_mask_from_lengths(query_lengths, weights.shape[0], weights.shape[1],
                                        weights.device)
        if qmask is not None:
            weights = weights * qmask.unsqueeze(-1)
        context = torch.bmm(weights.to(memory.values.dtype), memory.values)
        return AttentionOutput(context, weights if need_weights else None)
