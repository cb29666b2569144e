"""Build a score-based attention mechanism from its name (for configs and the CLI)."""

from __future__ import annotations

from typing import Any

from attnkit.attention.additive import AdditiveAttention, ConcatAttention
from attnkit.attention.base import ScoreAttention
from attnkit.attention.dot_product import DotProductAttention
from attnkit.attention.general import GeneralAttention
from attnkit.attention.local import LocalAttention

KINDS = ("dot", "scaled_dot", "general", "additive", "bahdanau", "concat", "local-m", "local-p")


def create(kind: str, query_dim: int, key_dim: int, *, units: int | None = None,
           window: int | None = None, **kw: Any) -> ScoreAttention:
    """Return a `ScoreAttention` for ``kind``.

    Args:
        kind: ``"dot"``, ``"scaled_dot"``, ``"general"``, ``"additive"`` / ``"bahdanau"``,
            ``"concat"``, ``"local-m"`` / ``"local-p"``.
        query_dim, key_dim: sizes of the last query and key dimensions (equal for the dot kinds).
        units: hidden size of additive/concat (default ``key_dim``) and of local-p's position
            network (default ``query_dim``).
        window: half-width ``D`` of the local kinds (required there).
        **kw: passed on (``dropout``, ``memory_budget_mb``, ``bias``; for the local kinds
            ``score``, the inner kind, default ``"general"``, ``gaussian``, ``renormalize``).
    """
    if kind in ("dot", "scaled_dot"):
        if query_dim != key_dim:
            raise ValueError(f"attention kind {kind!r} needs query_dim == key_dim, got "
                             f"query_dim={query_dim} and key_dim={key_dim}; use 'general' or "
                             f"'additive' for different sizes")
        mechanism = DotProductAttention(scaled=kind == "scaled_dot", **kw)
        mechanism.query_dim, mechanism.key_dim = query_dim, key_dim
        return mechanism
    if kind == "general":
        return GeneralAttention(query_dim, key_dim, **kw)
    if kind in ("additive", "bahdanau", "concat"):
        cls = ConcatAttention if kind == "concat" else AdditiveAttention
        return cls(query_dim, key_dim, key_dim if units is None else units, **kw)
    if kind in ("local-m", "local-p"):
        if window is None:
            raise ValueError(f"attention kind {kind!r} needs window=D (the half-width)")
        inner_kind = kw.pop("score", "general")
        if inner_kind in ("local-m", "local-p"):
            raise ValueError(f"the score of a local attention cannot be {inner_kind!r}")
        local_kw = {k: kw.pop(k) for k in ("gaussian", "renormalize") if k in kw}
        mode = "monotonic" if kind == "local-m" else "predictive"
        inner_units = units if inner_kind in ("additive", "bahdanau", "concat") else None
        inner = create(inner_kind, query_dim, key_dim, units=inner_units, **kw)
        return LocalAttention(inner, window, mode, query_dim=query_dim,
                              units=units if mode == "predictive" else None, **local_kw)
    raise ValueError(f"unknown attention kind {kind!r}; expected one of {', '.join(KINDS)}")
