"""The trainer's ``RUN/metrics.jsonl``, read back: one JSON object per line, written by
`attnkit.training.Trainer` (``{"kind": "train", ...}`` every ``log_every_steps``,
``{"kind": "eval", "epoch", "step", "val_<metric>", ...}`` per evaluation).

Example:
    ```python
    [e["val_accuracy"] for e in read_evaluations("runs/imdb")]
    ```
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from attnkit.fileio import MAX_VOCAB_BYTES, read_text

METRICS_LOG = "metrics.jsonl"


def read_evaluations(run: str | os.PathLike) -> list[dict[str, Any]]:
    """The evaluation lines of ``RUN/metrics.jsonl``, in order: each a dict with ``"epoch"``
    (counted from 0), ``"step"`` and ``evaluate_fn``'s metrics prefixed ``"val_"``.

    Raises:
        CheckpointError: no such file, not a regular file, or over `MAX_VOCAB_BYTES`.
        json.JSONDecodeError: a line that is not JSON.
    """
    text = read_text(Path(run) / METRICS_LOG, "the run's metrics", root=run,
                     limit=MAX_VOCAB_BYTES)
    records = (json.loads(line) for line in text.splitlines() if line.strip())
    return [r for r in records if r.get("kind") == "eval"]
