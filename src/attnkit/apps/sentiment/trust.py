"""Which explanation of a verdict to show first, and why: the method measured the most
faithful on this run (``attnkit sentiment explain`` writes ``RUN/faithfulness.json``), else
the one measured best for this app in docs/results.md.

A page, the API and the terminal open on that method; the others stay a pick away.

Example:
    ```python
    trust = trusted(Path("runs/imdb"))
    trust.method, trust.why     # "grad-input", "Shown first: gradient x input, ..."
    ```
"""

from __future__ import annotations

import os
from pathlib import Path

from attnkit.explain.faithfulness import RANDOM
from attnkit.explain.sentiment import METHODS
from attnkit.explain.trust import NAMES, Measured, Trust, best_shown, measured_in_run
from attnkit.fileio import write_json

FAITHFULNESS = "faithfulness.json"   # RUN/faithfulness.json: `sentiment explain`'s table
__all__ = ["FAITHFULNESS", "MEASURED", "NAMES", "Trust", "trusted", "write_table"]
# The confidence the verdict loses without a method's top words: higher is more faithful.
COMPREHENSIVENESS = "comprehensiveness ↑"

# docs/results.md, "Faithfulness of the explanations": 500 IMDB test reviews, keras2018.
DOCS_FIGURES = Measured(
    {"attention": 0.249, "rollout": 0.247, "grad-input": 0.561, "integrated-gradients": 0.557},
    COMPREHENSIVENESS, "docs/results.md, 500 IMDB reviews; `attnkit sentiment explain` "
    "measures a run")
MEASURED = best_shown(METHODS, DOCS_FIGURES)


def faithfulness_measured(table: dict) -> Measured | None:
    """``sentiment explain``'s table as a `Measured` (chance left out); None when it holds no
    method's score (KeyError, TypeError, ValueError or AttributeError when out of shape)."""
    scores = {m: float(row["comprehensiveness"]) for m, row in table["methods"].items()
              if m in METHODS and m != RANDOM}
    if not scores:
        return None
    return Measured(scores, COMPREHENSIVENESS, f"measured on this run by attnkit sentiment "
                    f"explain, {table.get('reviews', '?')} reviews")


def trusted(run: str | os.PathLike) -> Trust:
    """The run's most faithful method (its ``faithfulness.json``), else `MEASURED`. A table
    that cannot be read counts as none: it only orders the views."""
    return best_shown(METHODS, measured_in_run(run, FAITHFULNESS, "the run's faithfulness table",
                                               faithfulness_measured, DOCS_FIGURES))


def write_table(run: str | os.PathLike, table: dict) -> Path:
    """Write ``sentiment explain``'s table (with its ``"most_faithful"``) into the run."""
    return write_json(Path(run) / FAITHFULNESS, table)
