"""What links come from: a translation run's attention (a layer, a head or their average, read
at the step that predicts a word or the one that reads it), its trained alignment head, or a
gradient attribution. Each gives, per pair, a forward piece matrix (each target piece's
weights over the source) and, where it has one, a reverse one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.alignment.pieces import PairPieces
from attnkit.attention.rollout import rollout_cross
from attnkit.decoding.forced import Forced
from attnkit.errors import UsageError
from attnkit.explain.translation import attribution_rows
from attnkit.models.alignment_head import AlignmentHead, cell_features, directions

KINDS = ("eflomal", "attention", "rollout", "head", "grad-input", "integrated-gradients")


@dataclass(frozen=True)
class Method:
    """Where the links come from.

    Args:
        kind: one of `KINDS` (``rollout``: every layer's cross-attention times the encoder's
            rolled-out self-attention; ``eflomal``: the classical aligner, no model at all).
        layer, head: 0-based, or ``"avg"`` over all.
        shift: read the attention at the step that reads the target piece (shift-attention,
            Chen et al. 2020) rather than the one that predicts it.
    """

    kind: str = "attention"
    layer: int | str = "avg"
    head: int | str = "avg"
    shift: bool = False

    def name(self) -> str:
        """A short name for tables (``attention L2 avg shift``)."""
        if self.kind == "rollout":
            return "attention rollout" + (" shift" if self.shift else "")
        if self.kind != "attention":
            return self.kind
        layer = "layers avg" if self.layer == "avg" else f"L{int(self.layer) + 1}"
        head = "heads avg" if self.head == "avg" else f"H{int(self.head) + 1}"
        return f"attention {layer} {head}" + (" shift" if self.shift else "")


def column_normalised(fwd: Tensor) -> Tensor:
    """Each source piece's weights over the target: ``fwd`` normalised over its rows."""
    return fwd / fwd.sum(0, keepdim=True).clamp_min(1e-12)


def attribution_matrices(model: nn.Module, pairs: Sequence[PairPieces], method: str
                         ) -> list[tuple[Tensor, Tensor]]:
    """Each pair's gradient attribution matrix ``[n, S]``
    (`attnkit.explain.translation.attribution_rows`) and its column-normalised reverse."""
    out = []
    for pair in pairs:
        fwd = attribution_rows(model, pair.src_ids, pair.tgt_ids, method)
        out.append((fwd, column_normalised(fwd)))
    return out


def attention_rows(forced: Forced, method: Method, n: int) -> Tensor:
    """``[n, S]``: the chosen layer and head of a forced decoding, one row per target piece."""
    w = forced.attention                                      # [L, H, n + 1, S]
    layers, heads = w.shape[:2]
    for what, value, size in (("layer", method.layer, layers), ("head", method.head, heads)):
        if value != "avg" and not (isinstance(value, int) and 0 <= value < size):
            raise UsageError(f"--{what} {value if value == 'avg' else int(value) + 1}: this "
                             f"model has {size} {what}s (1 to {size}, or avg)")
    w = w.mean(0) if method.layer == "avg" else w[method.layer]
    w = w.mean(0) if method.head == "avg" else w[method.head]
    return w[1:n + 1] if method.shift else w[:n]


def rollout_rows(forced: Forced, shift: bool, n: int) -> Tensor:
    """``[n, S]``: the cross-attention rolled out through the encoder (an RNN, which has no
    encoder attention: its attention)."""
    w = forced.attention
    if forced.encoder is None:
        rows = w.mean((0, 1))
    else:
        rows = rollout_cross(list(w[:, None]), list(forced.encoder[:, None]))[0]
    return rows[1:n + 1] if shift else rows[:n]


@torch.no_grad()
def head_matrices(head: AlignmentHead, pairs: Sequence[PairPieces], forced: Sequence[Forced]
                  ) -> list[tuple[Tensor, Tensor]]:
    """The trained head's two directions for each pair, ``([n, S], [n, S])``."""
    out = []
    for pair, f in zip(pairs, forced, strict=True):
        n, s = len(pair.tgt_ids), len(pair.src_ids)
        query, memory, feats = head_inputs(head.config.layer, f, n, s)
        src_mask, tgt_mask = torch.ones(1, s, dtype=torch.bool), torch.ones(1, n, dtype=torch.bool)
        scores = head(query[None], memory[None], feats[None], src_mask, tgt_mask)
        fwd, rev = directions(scores, src_mask, tgt_mask)
        out.append((fwd[0], rev[0]))
    return out


def head_inputs(layer: int, forced: Forced, n: int, s: int) -> tuple[Tensor, Tensor, Tensor]:
    """The inputs of a head reading decoder ``layer`` for one pair: the states that read each
    target piece ``[n, d]``, the encoder memory ``[S, d]`` and the cell features ``[n, S, F]``."""
    if forced.states is None or forced.memory is None:
        raise UsageError("the trained aligner needs a Transformer run")
    query = forced.states[layer][1:n + 1]
    return query, forced.memory, cell_features(forced.attention, n, s)


def piece_matrices(pairs: Sequence[PairPieces], forced: Sequence[Forced], method: Method, *,
                   head: AlignmentHead | None = None) -> list[tuple[Tensor, Tensor]]:
    """Each pair's forward and reverse piece matrices ``[n, S]`` for an attention or head method
    (attributions: `attribution_matrices`); UsageError for a layer or head the model lacks, or
    the head method without a head."""
    if method.kind == "head":
        if head is None:
            raise UsageError("this run has no trained aligner (RUN/alignment/head.safetensors)"
                             "; train one with `attnkit translate align-train` (a "
                             "Transformer run), or use --method attention")
        return head_matrices(head, pairs, forced)
    if method.kind not in ("attention", "rollout"):
        raise ValueError(f"piece_matrices computes attention and head methods, not {method.kind}")
    out = []
    for pair, f in zip(pairs, forced, strict=True):
        n = len(pair.tgt_ids)
        if method.kind == "rollout":
            fwd = rollout_rows(f, method.shift, n)
        else:
            fwd = attention_rows(f, method, n)
        out.append((fwd, column_normalised(fwd)))
    return out
