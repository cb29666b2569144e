"""Which explanation of a verdict to show first, and why: the method measured most faithful on
this run (``RUN/faithfulness.json`` of ``attnkit sentiment explain``), else in
docs/results.md, when the measurement lets one trust it (`attnkit.explain.trust`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from attnkit.explain.sentiment import (
    COMPREHENSIVENESS,
    MARGIN,
    MIN_REVIEWS,
    measured,
)
from attnkit.explain.trust import NAMES, Measured, Trust, best_shown, measured_in_run
from attnkit.fileio import write_json

FAITHFULNESS = "faithfulness.json"   # RUN/faithfulness.json: `sentiment explain`'s table
__all__ = ["DOCS_FIGURES", "FAITHFULNESS", "NAMES", "Trust", "trusted", "write_table"]

# docs/results.md, "Faithfulness of the explanations": 500 IMDB test reviews, keras2018.
DOCS_FIGURES = Measured(
    {"attention": 0.249, "rollout": 0.247, "grad-input": 0.561, "integrated-gradients": 0.557},
    COMPREHENSIVENESS, "docs/results.md, 500 IMDB reviews; `attnkit sentiment explain` "
    "measures a run", random=0.040, count=500, margin=MARGIN, min_count=MIN_REVIEWS,
    unit="reviews")


def faithfulness_measured(table: dict) -> Measured | None:
    """``sentiment explain``'s table as a `Measured`; None when it holds no method's score
    (KeyError, TypeError, ValueError or AttributeError when out of shape)."""
    found = measured(table, f"measured on this run by attnkit sentiment explain, "
                     f"{table.get('reviews', '?')} reviews")
    return found if found.scores else None


def trusted(run: str | os.PathLike, carried: Sequence[str]) -> Trust:
    """The method of ``carried`` to show first, by the run's ``faithfulness.json`` else
    `DOCS_FIGURES`; an unreadable or non-finite table counts as none (one warning names it).
    """
    return best_shown(carried, measured_in_run(run, FAITHFULNESS, "the run's faithfulness "
                                               "table", faithfulness_measured, DOCS_FIGURES),
                      add="--explain")


def write_table(run: str | os.PathLike, table: dict) -> Path:
    """Write ``sentiment explain``'s table (with its ``"most_faithful"``) into the run."""
    return write_json(Path(run) / FAITHFULNESS, table)
