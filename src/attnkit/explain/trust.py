"""Which explanation a page opens on, and the one sentence saying why: shared by the apps.

Each app measures its methods against something outside the model (sentiment:
comprehensiveness; caption: the pointing game; translation: AER). `Measured.verdict` names
the method to trust only when enough examples lead random and every other method by the
margin (docs/guide/trust.md); `best_shown` picks the method a page opens on by it and writes
the sentence that says why. The figures of docs/results.md an app cites when its run measured
none are package data (``measured.json``, read by `docs_figures`)."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from attnkit.errors import CheckpointError
from attnkit.fileio import read_json_object

RANDOM = "random"   # the floor in the measurement tables
# How the sentences name each method (the apps' METHODS keys).
NAMES = {"attention": "attention", "rollout": "attention rollout",
         "grad-input": "gradient × input", "integrated-gradients": "integrated gradients"}


@dataclass(frozen=True)
class Measured:
    """One measurement of an app's explanation methods.

    Attributes:
        scores: the figure of each measured method (finite).
        measure: what the figure is, with its direction (``"pointing accuracy ↑"``).
        source: where it was measured (``"docs/results.md, 500 synthetic scenes"``).
        lower: True when a lower figure is better (AER).
        random: the floor's figure on the same examples (None: none); ``floor`` names it.
        count / unit: how many examples were measured (None: not known) and what they are.
        margin / min_count: the lead over random and every other method, and the fewest
            examples, a verdict needs.
    """

    scores: Mapping[str, float]
    measure: str
    source: str
    lower: bool = False
    random: float | None = None
    count: int | None = None
    margin: float = 0.0
    min_count: int = 0
    unit: str = "examples"
    floor: str = "random"

    def rank(self, method: str) -> tuple[int, float]:
        """A sort key: measured methods by their figure, best first, then unmeasured ones."""
        if method not in self.scores:
            return (1, 0.0)
        score = float(self.scores[method])
        return (0, score if self.lower else -score)

    def lead(self, a: float, b: float) -> float:
        """How far figure ``a`` is better than ``b`` (negative: worse)."""
        return b - a if self.lower else a - b

    def verdict(self) -> tuple[str | None, str]:
        """The method to trust and why, or None and why none can be trusted yet."""
        if not self.scores:
            return None, f"nothing was measured ({self.source})"
        figures = [*self.scores.values(), *([] if self.random is None else [self.random])]
        if not all(math.isfinite(float(v)) for v in figures):
            return None, "some of its figures are not finite numbers"
        if self.count is not None and self.count < self.min_count:
            return None, (f"the measurement covers {self.count} {self.unit}, fewer than the "
                          f"{self.min_count} a verdict needs")
        best = min(self.scores, key=self.rank)
        top = float(self.scores[best])
        if self.random is not None and self.lead(top, self.random) < self.margin:
            return None, (f"the best, {NAMES.get(best, best)} ({top:.3g}), does not beat "
                          f"{self.floor} ({self.random:.3g}) by {self.margin:g}")
        close = [m for m in self.scores
                 if m != best and self.lead(top, float(self.scores[m])) < self.margin]
        if close:
            return None, (f"{NAMES.get(best, best)} ({top:.3g}) and "
                          f"{NAMES.get(close[0], close[0])} ({self.scores[close[0]]:.3g}) are "
                          f"less than {self.margin:g} apart")
        return best, (f"it leads {self.floor} and every other method by {self.margin:g} or more, "
                      f"on {self.count if self.count is not None else 'all the'} {self.unit}")

    def figures(self, first: str | None = None) -> str:
        """The figures, ``first``'s first, then random: ``"AER ↓ 62.4 for attention, ..."``."""
        names = sorted(self.scores, key=lambda m: (m != first, self.rank(m)))
        parts = [f"{self.scores[m]:.3g} for {NAMES.get(m, m)}" for m in names]
        if self.random is not None:
            parts.append(f"{self.random:.3g} for {self.floor}")
        return f"{self.measure} " + ", ".join(parts)


def docs_figures(name: str) -> Any:
    """The figures ``name`` of docs/results.md (``measured.json`` beside this module)."""
    table = json.loads(files(__package__).joinpath("measured.json").read_text(encoding="utf-8"))
    return table[name]


def docs_measured(name: str, measure: str, **rule: Any) -> Measured:
    """`docs_figures` ``name`` as a `Measured` of ``measure``, judged by ``rule`` (``margin``,
    ``min_count``, ``lower``)."""
    return Measured(measure=measure, **docs_figures(name), **rule)


def measured_in_run(run: str | os.PathLike, name: str, what: str,
                    measure: Callable[[dict[str, Any]], Measured | None],
                    docs: Measured) -> Measured:
    """The `Measured` of the JSON table ``RUN/name`` an app's command wrote (``measure`` reads
    it; None or no score: none), else ``docs``. A table unreadable, out of shape or not finite
    counts as none, with one warning line naming the file."""
    path = Path(run) / name
    if not os.path.lexists(path):
        return docs
    try:
        measured = measure(read_json_object(path, what, root=run))
    except (CheckpointError, KeyError, TypeError, ValueError, AttributeError) as exc:
        _unused(path, f"it cannot be read ({str(exc).splitlines()[0] or type(exc).__name__})",
                docs)
        return docs
    if measured is None or not measured.scores:
        return docs
    bad = {m: v for m, v in {**measured.scores, "random": measured.random}.items()
           if v is not None and not math.isfinite(float(v))}
    if bad:
        _unused(path, "figures that are not finite numbers ("
                + ", ".join(f"{m} {v}" for m, v in bad.items()) + ")", docs)
        return docs
    return measured


def run_trust(run: str | os.PathLike, carried: Sequence[str], name: str, what: str,
              measure: Callable[[dict[str, Any]], Measured | None], docs: Measured) -> str:
    """`best_shown` of ``carried`` by `measured_in_run` (the option ``--explain``)."""
    return best_shown(carried, measured_in_run(run, name, what, measure, docs), add="--explain")


def _unused(path: Path, problem: str, docs: Measured) -> None:
    # Python shows a given warning once per process: a server reading the table at every
    # request logs it once; `attnkit` prints it as one line.
    warnings.warn(f"{path}: {problem}; its figures are not used ({docs.source} instead)",
                  stacklevel=3)


def best_shown(carried: Sequence[str], measured: Measured, *, add: str = "") -> str:
    """The sentence saying which of ``carried`` (the page's methods, ``"attention"`` among them)
    is shown first by ``measured`` and why; ``add`` is the option naming a trusted method not
    carried."""
    trusted, reason = measured.verdict()
    lead = trusted or "attention"
    first = min(carried, key=lambda m: (m != lead, measured.rank(m)))
    name = NAMES.get(trusted, trusted)
    if trusted is None:
        figures = f": {measured.figures()}" if measured.scores else ""
        return (f"Shown first: {NAMES.get(first, first)}"
               + (", the model's own weights" if first == "attention" else "")
               + f"; no method can be trusted yet: {reason} ({measured.source}{figures}).")
    elif first == trusted:
        return (f"Shown first: {name}, the method to trust here: {reason} "
               f"({measured.source}: {measured.figures(trusted)}).")
    else:
        return (f"Shown first: {NAMES.get(first, first)}; {name} is the method to trust here "
               f"({measured.source}: {measured.figures(trusted)})"
               + (f": add it with {add} {trusted}." if add else "."))


def shown_order(asked: Sequence[str]) -> tuple[str, ...]:
    """The methods a prediction carries, in the order its page offers them (the first is what
    it opens on): those asked for (``--explain``) as asked, then attention; attention alone
    when none was asked (every app computes no other method unless asked)."""
    return tuple(dict.fromkeys([*asked, "attention"]))
