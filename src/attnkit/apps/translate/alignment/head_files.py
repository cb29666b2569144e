"""A run's trained aligner on disk: ``RUN/alignment/head.safetensors`` (the weights) and
``RUN/alignment/head.json`` (its sizes, the settings `translate align` uses by default on this
run, and how it was trained).

Example:
    ```python
    save_head(run, head, defaults={"extraction": "argmax", "symmetrize": "intersection"},
              trained={"pairs": 20000, "seconds": 95.0})
    head, info = load_head(run)          # (None, None) when the run has none
    ```
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from attnkit.apps.run_files import read_json_object
from attnkit.errors import CheckpointError
from attnkit.fileio import atomic_write_text
from attnkit.models.alignment_head import AlignmentHead, AlignmentHeadConfig
from attnkit.training import load_weights, save_weights

FOLDER = "alignment"
WEIGHTS, INFO = "head.safetensors", "head.json"


def head_path(run: str | os.PathLike) -> Path:
    """``RUN/alignment``."""
    return Path(run) / FOLDER


def save_head(run: str | os.PathLike, head: AlignmentHead, *, defaults: dict[str, Any],
              trained: dict[str, Any]) -> Path:
    """Write the head's weights and description into ``RUN/alignment`` (atomically)."""
    folder = head_path(run)
    folder.mkdir(exist_ok=True)
    save_weights(head, folder / WEIGHTS)
    info = {"head": head.config.to_dict(), "defaults": defaults, "trained": trained}
    atomic_write_text(folder / INFO, json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    return folder


def load_head(run: str | os.PathLike) -> tuple[AlignmentHead | None, dict[str, Any] | None]:
    """The run's trained aligner and its ``head.json``; ``(None, None)`` when it has none.

    Raises:
        CheckpointError: a head whose files are broken or do not match.
    """
    folder = head_path(run)
    if not (folder / INFO).exists():
        return None, None
    info = read_json_object(folder / INFO, "the run's alignment head description", root=run)
    try:
        config = AlignmentHeadConfig.from_dict(info["head"])
        head = AlignmentHead(config)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{folder / INFO}: not an alignment head description "
                              f"({exc})") from None
    load_weights(head, folder / WEIGHTS)
    head.eval()
    return head, info
