"""How far the caption page may trust a word's map, and why: the pointing game
(`attnkit.explain.captions.pointing_game`) of this run's ``caption eval --pointing``, else of
docs/results.md, read by the rule every app shares (`attnkit.explain.trust.Measured.verdict`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from attnkit.apps.results import TEST_METRICS
from attnkit.explain.trust import RANDOM, Measured, Trust, best_shown, measured_in_run

POINTING = "pointing accuracy ↑"
# Trust needs a lead of MARGIN in pointing accuracy over random and every other method, on
# MIN_WORDS words or more (docs/guide/trust.md).
MARGIN, MIN_WORDS = 0.02, 100
# docs/results.md, "Pointing game: attention against gradients": 1,403 colour and count words
# of 500 synthetic test scenes.
MEASURED = Measured({"attention": 0.703, "grad-input": 0.676, "integrated-gradients": 0.734},
                    POINTING, "docs/results.md, the pointing game on 500 synthetic scenes",
                    random=0.128, count=1403, margin=MARGIN, min_count=MIN_WORDS,
                    unit="words")


def pointing_measured(table: Mapping | None) -> Measured | None:
    """A `attnkit.explain.captions.pointing_game` table as a `Measured` (random as the floor);
    None when it holds no method.
    """
    scores = {m: float(row["accuracy"]) for m, row in (table or {}).items() if m != RANDOM}
    if not scores:
        return None
    words = int(next(iter(table.values()))["words"])
    floor = table.get(RANDOM)
    return Measured(scores, POINTING, f"this run's caption eval --pointing, {words} words",
                    random=None if floor is None else float(floor["accuracy"]), count=words,
                    margin=MARGIN, min_count=MIN_WORDS, unit="words")


def caption_trust(run: str | os.PathLike, carried: Sequence[str]) -> Trust:
    """The method of ``carried`` to show first, by the run's pointing game else `MEASURED`; an
    unreadable file counts as none (one warning names it).
    """
    measured = measured_in_run(run, TEST_METRICS, "the run's test metrics",
                               lambda metrics: pointing_measured(metrics.get("pointing")),
                               MEASURED)
    return best_shown(carried, measured, add="--explain")
