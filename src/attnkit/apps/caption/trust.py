"""Which map of a caption word the caption page opens on, and why: the method that pointed at
the named ducks most often (the pointing game, `attnkit.explain.pointing`) in this run's
``caption eval --pointing`` (its ``test_metrics.json``), else in docs/results.md.

Example:
    ```python
    trust = caption_trust("runs/ducks", ["attention", "integrated-gradients"])
    trust.order, trust.why      # ("integrated-gradients", "attention"), "Shown first: ..."
    ```
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from attnkit.apps.results import TEST_METRICS
from attnkit.explain.pointing import RANDOM
from attnkit.explain.trust import Measured, Trust, best_shown, measured_in_run

# docs/results.md, "Pointing game: attention against gradients": 1,403 colour and count words
# of 500 synthetic test scenes.
MEASURED = Measured({"attention": 0.703, "grad-input": 0.676, "integrated-gradients": 0.734},
                    "pointing accuracy ↑", "docs/results.md, the pointing game on 500 synthetic "
                    "scenes")


def pointing_measured(table: Mapping | None) -> Measured:
    """A `attnkit.explain.pointing.pointing_game` table as a `Measured` (chance left out);
    `MEASURED` when there is none."""
    try:
        scores = {m: float(row["accuracy"]) for m, row in (table or {}).items() if m != RANDOM}
        words = next(iter(table.values()))["words"] if scores else 0
    except (KeyError, TypeError, ValueError, AttributeError):
        return MEASURED
    if not scores:
        return MEASURED
    return Measured(scores, "pointing accuracy ↑", f"this run's caption eval --pointing, "
                    f"{words} words")


def caption_trust(run: str | os.PathLike, carried: Sequence[str]) -> Trust:
    """The method of ``carried`` to show first, by the run's pointing game (its
    ``test_metrics.json``, written by ``caption eval --pointing``) else `MEASURED`. A file
    that cannot be read counts as none: it only orders the views."""
    measured = measured_in_run(run, TEST_METRICS, "the run's test metrics",
                               lambda metrics: pointing_measured(metrics.get("pointing")),
                               MEASURED)
    return best_shown(carried, measured, add="--explain")
