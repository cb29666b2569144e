"""Training a run's aligner (``attnkit translate align-train``): eflomal's links of the run's
training pairs as labels, the alignment head fitted on a sample of them, everything within a
time budget; the translation model is not changed.

Example:
    ```python
    train_aligner("runs/fr", minutes=2)     # -> Path("runs/fr/alignment")
    ```
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from attnkit.apps.base import Log, stderr_log
from attnkit.apps.translate.alignment.head_files import save_head
from attnkit.apps.translate.alignment.head_training import fit_head, head_examples
from attnkit.apps.translate.alignment.labels import LABEL_SYMMETRIZATION, piece_labels, raw_labels
from attnkit.apps.translate.alignment.pieces import raw_pieces
from attnkit.errors import UsageError
from attnkit.models.alignment_head import AlignmentHead, AlignmentHeadConfig
from attnkit.models.config import TransformerConfig

# What `translate align` does by default with a trained aligner (measured on the WPT03 trial
# set: docs/results.md, "Word alignment").
HEAD_DEFAULTS = {"extraction": "argmax", "symmetrize": "intersection", "threshold": 0.5,
                 "adapt": True}


def train_aligner(run: str | os.PathLike, *, data: str | None = None, pairs: int = 20000,
                  minutes: float = 2.0, layer: int | None = None, seed: int = 0,
                  log: Log = stderr_log) -> Path:
    """Train and save the aligner of a Transformer run (module doc).

    Args:
        run: the translate run.
        data: raw training pairs for eflomal (None: the run's data).
        pairs: how many of them label the head.
        minutes: the whole budget (eflomal, forced decoding, fitting).
        layer: the decoder layer the head reads, 1-based (None: the last).
        seed: which pairs, and the batch order.
        log: progress lines.

    Returns:
        ``RUN/alignment``.

    Raises:
        UsageError: not a Transformer run; a bad count or budget.
    """
    from attnkit.apps.translate import load_run
    from attnkit.apps.translate.alignment.adapt import background_pairs

    if pairs < 1 or minutes <= 0:
        raise UsageError("--pairs and --max-minutes must be positive")
    start = time.monotonic()
    loaded = load_run(run)
    c = loaded.model.config
    if not isinstance(c, TransformerConfig):
        raise UsageError(f"{run}: the trained aligner reads a Transformer's states; this is an "
                         "RNN run (align it with --method attention)")
    if layer is not None and not 1 <= layer <= c.layers:
        raise UsageError(f"--layer must be from 1 to {c.layers}")
    corpus = [(en, fr) for en, fr in background_pairs(loaded, data) if en.strip() and fr.strip()]
    log(f"aligner: eflomal on {len(corpus):,} training pairs")
    links = raw_labels(corpus, LABEL_SYMMETRIZATION)
    chosen = random.Random(seed).sample(range(len(corpus)), min(pairs, len(corpus)))
    pieces = [raw_pieces(loaded.pipeline, *corpus[k]) for k in chosen]
    labels = [piece_labels(p, links[k]) for p, k in zip(pieces, chosen, strict=True)]
    config = AlignmentHeadConfig(d_model=c.d_model, layers=c.layers, heads=c.heads,
                                 layer=-1 if layer is None else layer - 1)
    log(f"aligner: labels ready ({time.monotonic() - start:.0f} s); forced decoding of "
        f"{len(pieces):,} pairs")
    examples = head_examples(loaded.model, config, pieces, labels)
    head = AlignmentHead(config)
    left = max(minutes * 60 - (time.monotonic() - start), 1.0)
    report = fit_head(head, examples, seconds=left, epochs=50, seed=seed, log=log)
    trained = {**report, "pairs": len(pieces), "eflomal_pairs": len(corpus),
               "labels": LABEL_SYMMETRIZATION, "total_seconds": round(time.monotonic() - start, 1)}
    return save_head(loaded.path, head, defaults=HEAD_DEFAULTS, trained=trained)
