"""Which explanation a page opens on, and the one sentence saying why: shared by the apps.

Each app measures its explanation methods against something outside the model (sentiment:
comprehensiveness, `attnkit.apps.sentiment.trust`; caption: the pointing game; translation:
AER against gold word alignments). `best_shown` orders the methods a page actually carries
by such a measurement and writes why the first is first; when the best measured method is
not on the page, the sentence says which it is and how to add it.

Example:
    ```python
    measured = Measured({"attention": 0.703, "integrated-gradients": 0.734},
                        "pointing accuracy", "docs/results.md, 500 scenes")
    trust = best_shown(["attention"], measured, add="--explain")
    trust.method, trust.order, trust.why    # "attention", ("attention",), "Shown first: ..."
    ```
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnkit.errors import CheckpointError
from attnkit.fileio import read_json_object

# How the sentences name each method (the apps' METHODS keys).
NAMES = {"attention": "attention", "rollout": "attention rollout",
         "grad-input": "gradient × input", "integrated-gradients": "integrated gradients"}


@dataclass(frozen=True)
class Trust:
    """The method to show first and one sentence saying why.

    Attributes:
        method: the method's key (``"attention"``, ``"grad-input"``, ...).
        why: one sentence for the page (and the API).
        order: the methods the page carries, best measured first (``method`` first).
    """

    method: str
    why: str
    order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """One measurement of an app's explanation methods.

    Attributes:
        scores: the figure of each measured method.
        measure: what the figure is, with its direction (``"pointing accuracy ↑"``).
        source: where it was measured (``"docs/results.md, 500 synthetic scenes"``).
        lower: True when a lower figure is better (AER).
    """

    scores: Mapping[str, float]
    measure: str
    source: str
    lower: bool = False

    def rank(self, method: str) -> tuple[int, float]:
        """A sort key: measured methods by their figure, best first, then unmeasured ones."""
        if method not in self.scores:
            return (1, 0.0)
        score = float(self.scores[method])
        return (0, score if self.lower else -score)


def measured_in_run(run: str | os.PathLike, name: str, what: str,
                    measure: Callable[[dict[str, Any]], Measured | None],
                    docs: Measured) -> Measured:
    """The measurement an app's command wrote into the run (the JSON table ``RUN/name``, read
    by ``measure``), else ``docs`` (the docs/results.md figure). A table that is missing,
    cannot be read, was hand-edited out of shape (``measure`` raises KeyError, TypeError,
    ValueError or AttributeError) or has no scores (``measure`` returns None) counts as none:
    it only orders the views.

    Args:
        run: the run folder.
        name: the table's file name in it (``"faithfulness.json"``).
        what: what the table is, for `read_json_object`'s checks.
        measure: the table (a JSON object) -> its `Measured`, or None when it holds no score.
        docs: the measurement to fall back on.
    """
    path = Path(run) / name
    if not path.is_file():
        return docs
    try:
        measured = measure(read_json_object(path, what, root=run))
    except (CheckpointError, KeyError, TypeError, ValueError, AttributeError):
        return docs
    return docs if measured is None else measured


def best_shown(carried: Sequence[str], measured: Measured, *, add: str = "") -> Trust:
    """Order ``carried`` (the methods a page has, ``"attention"`` among them) by ``measured``
    and say in one sentence why the first is shown first.

    Args:
        carried: the page's methods, in any order.
        measured: the app's measurement (the run's own, else docs/results.md's).
        add: the option that adds a method (``"--explain"``), named when the best measured
            method is not on the page; empty: not named.
    """
    order = tuple(sorted(dict.fromkeys(carried), key=measured.rank))
    first = order[0]
    best = min(measured.scores, key=measured.rank) if measured.scores else first
    if first not in measured.scores:
        return Trust(first, f"Shown first: {NAMES.get(first, first)}; no method on this page "
                     f"was measured ({measured.source}).", order)
    def figure(m: str) -> str:
        return f"{measured.scores[m]:.3g} for {NAMES.get(m, m)}"

    others = ", ".join(figure(m) for m in sorted(measured.scores, key=measured.rank)
                       if m != first)
    what = ("the method measured best for this app" if best == first else
            "the only method on this page" if len(order) == 1 else
            "the best measured of the methods on this page")
    why = (f"Shown first: {NAMES.get(first, first)}, {what} ({measured.source}: "
           f"{measured.measure} {measured.scores[first]:.3g}"
           + (f", against {others}" if others else "") + ")")
    if best != first:
        why += f"; {NAMES.get(best, best)} measured better" + (f": add it with {add} {best}"
                                                              if add else "")
    return Trust(first, why + ".", order)
