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

from attnkit.apps.trust import NAMES, Trust
from attnkit.errors import CheckpointError
from attnkit.explain.faithfulness import RANDOM
from attnkit.fileio import read_json_object, write_json

FAITHFULNESS = "faithfulness.json"   # RUN/faithfulness.json: `sentiment explain`'s table
__all__ = ["FAITHFULNESS", "MEASURED", "NAMES", "Trust", "trusted", "write_table"]


# docs/results.md, "Faithfulness of the explanations": 500 IMDB test reviews, keras2018.
MEASURED = Trust("grad-input", "Shown first: gradient × input, the method measured the most "
                 "faithful for this app (docs/results.md, 500 IMDB reviews: removing its top "
                 "words costs the verdict 0.561 of confidence, comprehensiveness ↑, against "
                 "0.249 for attention); `attnkit sentiment explain` measures this run.")


def trusted(run: str | os.PathLike) -> Trust:
    """The run's most faithful method (its ``faithfulness.json``), else `MEASURED`. A table
    that cannot be read counts as none: it only orders the views."""
    path = Path(run) / FAITHFULNESS
    if not path.is_file():
        return MEASURED
    try:
        table = read_json_object(path, "the run's faithfulness table", root=run)
        best, methods = table["most_faithful"], table["methods"]
        score = float(methods[best]["comprehensiveness"])
        others = ", ".join(f"{float(methods[m]['comprehensiveness']):.3f} for "
                           f"{NAMES.get(m, m)}" for m in methods if m not in (best, RANDOM))
    except (CheckpointError, KeyError, TypeError, ValueError):   # a table edited by hand
        return MEASURED
    if best not in NAMES:
        return MEASURED
    return Trust(best, f"Shown first: {NAMES[best]}, the method measured the most faithful on "
                 f"this run (attnkit sentiment explain, {table.get('reviews', '?')} reviews: "
                 f"removing its top words costs the verdict {score:.3f} of confidence, "
                 f"comprehensiveness ↑" + (f", against {others}" if others else "") + ").")


def write_table(run: str | os.PathLike, table: dict) -> Path:
    """Write ``sentiment explain``'s table (with its ``"most_faithful"``) into the run."""
    return write_json(Path(run) / FAITHFULNESS, table)
