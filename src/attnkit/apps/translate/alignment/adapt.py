"""Adapting a run's trained aligner to the pairs it is asked to align, as classical aligners
do: no gold link is used, only the pairs themselves.

eflomal is fitted on the pairs together with the run's own training pairs (the pairs alone
are too few for a statistical aligner) and its symmetrised links of the pairs become labels;
the alignment head is then fine-tuned on them for a few seconds to minutes. The translation
model does not change. The whole adaptation stays within a stated budget: eflomal scales with
the training data (about a minute for 160,000 Tatoeba pairs on 2 CPU cores), the head's
fine-tuning takes what is left of ``minutes``.

Example:
    ```python
    note = adapt_head(loaded, head, token_pairs, pairs, forced, minutes=10)
    # "adapted to the 37 pairs: eflomal on them and 160,916 training pairs (58 s), ..."
    ```
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from attnkit.apps.base import Loaded, Log
from attnkit.apps.translate.alignment.head_training import HeadExample, fit_head
from attnkit.apps.translate.alignment.labels import eflomal_labels, piece_labels
from attnkit.apps.translate.alignment.methods import head_inputs
from attnkit.apps.translate.alignment.pieces import PairPieces
from attnkit.decoding.forced import Forced
from attnkit.errors import DataError, UsageError
from attnkit.models.alignment_head import AlignmentHead

# Fine-tuning passes over the pairs: enough for the head to follow the pairs' labels, few
# enough not to copy them link for link (measured on the WPT03 trial set; docs/results.md).
ADAPT_EPOCHS = 30


def background_pairs(loaded: Loaded, data: str | None) -> list[tuple[str, str]]:
    """Raw pairs eflomal learns from besides the pairs to align: ``data`` (a pairs file or a
    train/valid/test folder: its training split) or the run's own training data."""
    from attnkit.data.translation_splits import data_spec, load_splits

    spec = loaded.config["data"] if data is None else data_spec(data, 0, None)
    try:
        return load_splits(spec, progress=False)["train"]
    except DataError as exc:
        where = "--adapt-data" if data is not None else "the run's training data"
        raise UsageError(f"the adaptation reads {where} and cannot ({exc}); give "
                         "--adapt-data DATA (a pairs file or a train/valid/test folder) or "
                         "--no-adapt") from None


def adapt_head(loaded: Loaded, head: AlignmentHead,
               token_pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
               pairs: Sequence[PairPieces], forced: Sequence[Forced], *,
               minutes: float = 10.0, data: str | None = None, log: Log) -> str:
    """Fine-tune ``head`` (in place) on eflomal's links of ``token_pairs``.

    Args:
        loaded: the run (its training data is eflomal's background).
        head: the run's alignment head (a copy: it is changed).
        token_pairs: the whitespace tokens of the pairs to align.
        pairs, forced: their pieces and forced decodings (with states).
        minutes: the whole adaptation's budget.
        data: other raw training pairs for eflomal (None: the run's).
        log: where the adaptation is announced.

    Returns:
        One line saying what was done.
    """
    start = time.monotonic()
    background = background_pairs(loaded, data)
    log(f"attnkit: adapting the aligner to the {len(pairs)} pairs (no gold links; budget "
        f"{minutes:g} min): eflomal on them and {len(background):,} training pairs, then the "
        "alignment head fine-tuned on eflomal's links")
    links = eflomal_labels(token_pairs, background=background)
    labelled = time.monotonic() - start
    examples = []
    for pair, f, link in zip(pairs, forced, links, strict=True):
        n, s = len(pair.tgt_ids), len(pair.src_ids)
        query, memory, feats = head_inputs(head, f, n, s)
        examples.append(HeadExample(query, memory, feats, piece_labels(pair, link)))
    left = max(minutes * 60 - (time.monotonic() - start), 1.0)
    report = fit_head(head, examples, seconds=left, epochs=ADAPT_EPOCHS)
    return (f"adapted to the {len(pairs)} pairs: eflomal on them and {len(background):,} "
            f"training pairs ({labelled:.0f} s), the head fine-tuned for {report['epochs']} "
            f"passes ({report['seconds']:.0f} s)")
