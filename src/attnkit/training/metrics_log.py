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

from attnkit.errors import CheckpointError
from attnkit.fileio import MAX_VOCAB_BYTES, read_text

METRICS_LOG = "metrics.jsonl"


def read_evaluations(run: str | os.PathLike) -> list[dict[str, Any]]:
    """The evaluation lines of ``RUN/metrics.jsonl``, in order: each a dict with ``"epoch"``
    (counted from 0), ``"step"`` and ``evaluate_fn``'s metrics prefixed ``"val_"``.

    Raises:
        CheckpointError: no such file, not a regular file, over `MAX_VOCAB_BYTES`, or a line
            that is not a JSON object (named with its number).
    """
    path = Path(run) / METRICS_LOG
    text = read_text(path, "the run's metrics", root=run, limit=MAX_VOCAB_BYTES)
    evaluations = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{path} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise CheckpointError(f"{path} line {number}: not a JSON object")
        if record.get("kind") == "eval":
            evaluations.append(record)
    return evaluations
