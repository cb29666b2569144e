"""``attnkit sentiment explain``: how faithful each explanation method is on reviews
(`attnkit.explain.sentiment.faithfulness`), as a table and a JSON line naming the method to trust
when the measurement allows one; written into ``RUN/faithfulness.json`` for the run's pages
and API (`attnkit.apps.sentiment.prediction.trusted`).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from attnkit.apps.presentation import Command
from attnkit.apps.sentiment.prediction import FAITHFULNESS
from attnkit.errors import UsageError
from attnkit.explain.captum import explain_methods
from attnkit.fileio import write_json
from attnkit.settings import Option

DEFAULT_LIMIT = 500


def _explain(values: dict[str, Any]) -> int:
    from attnkit.apps.sentiment import load_run
    from attnkit.apps.sentiment.prepare import load_reviews
    from attnkit.explain.sentiment import METHODS, faithfulness, format_table

    limit = values.get("limit") or DEFAULT_LIMIT
    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    methods = explain_methods(values.get("methods") or "all", METHODS)
    if not methods:
        raise UsageError(f"--methods names no method: give some of {', '.join(METHODS)} "
                         "(comma-separated) or all")
    reviews = load_reviews(values["data"], values.get("split") or "test", False)
    seed = values.get("seed") or 0
    # A random sample: data files are often sorted by label (IMDB: all negatives first).
    chosen = sorted(random.Random(seed).sample(range(len(reviews)), min(limit, len(reviews))))
    loaded = load_run(values["run"], device=values.get("device") or "cpu")
    result = faithfulness(loaded.model, loaded.pipeline, [reviews[k].text for k in chosen],
                          methods=methods, seed=seed)
    table = {**result, "data": str(values["data"]), "run": str(values["run"]), "seed": seed}
    print(format_table(result))
    if values.get("json"):
        print(json.dumps(table, ensure_ascii=False))
    said = (f"attnkit: {result['reviews']} reviews (a random {min(limit, len(reviews))} of "
            f"{len(reviews):,}, seed {seed})")
    # Into the run: its pages and the API then open on the method measured most faithful. The
    # table is printed first: a run the user may not write (a shared one) loses no measurement.
    try:
        written = write_json(loaded.path / FAITHFULNESS, table)
    except OSError as exc:
        print(said, file=sys.stderr)
        print(f"attnkit: warning: could not store the table in {loaded.path} "
              f"({exc.strerror or exc}): its pages keep their order", file=sys.stderr)
        return 0
    best = result["most_faithful"]
    print(f"{said}; wrote {written}: pages and the API of this run now say "
          + (f"that {best} is the method to trust (--explain {best} shows it)" if best else
             "that no method can be trusted yet"), file=sys.stderr)
    return 0


EXPLAIN_COMMAND = Command(
    "explain", "how faithful each explanation is: ERASER comprehensiveness and sufficiency "
    "per method, random token orders as the floor; the method to trust (the highest "
    "comprehensiveness, ahead of random and every other method by 0.02 on 100 reviews or "
    "more) is named and written into the run, whose pages then say so",
    (Option("--run", str, "the sentiment run folder", metavar="RUN", required=True),
     Option("--data", str, "reviews (any form --data takes in train/eval; their labels are "
            "not used)", metavar="FILE", required=True),
     Option("--split", str, "the split of --data (default test)", choices=("train", "test")),
     Option("--limit", int, f"explain a random N of the reviews (default {DEFAULT_LIMIT})",
            metavar="N"),
     Option("--methods", str, "comma-separated among attention, rollout, grad-input, "
            "integrated-gradients (default all)", metavar="LIST"),
     Option("--seed", int, "which reviews, and the random orders (default 0)"),
     Option("--json", None, "also print the figures as one JSON line (the last line)")),
    _explain,
    ("attnkit sentiment explain --run runs/imdb --data ../shared/data/imdb --limit 500 --json",),
    runtime=True)
