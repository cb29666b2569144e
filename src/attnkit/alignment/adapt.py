"""Adapting a trained aligner to the pairs it is asked to align, as classical aligners do: no
gold link is used, only the pairs themselves.

eflomal is fitted on the pairs together with background pairs, a run's own training pairs
(the pairs alone are too few for a statistical aligner) and its symmetrised links of the pairs
become labels; the alignment head is then fine-tuned on them for a few seconds to minutes. The
translation model does not change. The whole adaptation stays within a stated budget: eflomal
scales with the training data (about a minute for 160,000 Tatoeba pairs on 2 CPU cores), the
head's fine-tuning takes what is left of ``minutes``.

Example:
    ```python
    note = adapt_head(head, token_pairs, pairs, forced, background=lambda: tatoeba_pairs,
                      minutes=10)
    # "adapted to the 37 pairs: eflomal on them and 160,916 training pairs (58 s), ..."
    ```
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from attnkit.alignment.head_training import HeadExample, fit_head
from attnkit.alignment.labels import eflomal_labels, piece_labels
from attnkit.alignment.methods import head_inputs
from attnkit.alignment.pieces import PairPieces
from attnkit.decoding.forced import Forced
from attnkit.models.alignment_head import AlignmentHead

# Fine-tuning passes over the pairs: enough for the head to follow the pairs' labels, few
# enough not to copy them link for link (measured on the WPT03 trial set; docs/results.md).
ADAPT_EPOCHS = 30


def adapt_head(head: AlignmentHead, token_pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
               pairs: Sequence[PairPieces], forced: Sequence[Forced], *,
               background: Callable[[], Sequence[tuple[str, str]]], minutes: float = 10.0,
               log: Callable[[str], None]) -> str:
    """Fine-tune ``head`` (in place) on eflomal's links of ``token_pairs``.

    Args:
        head: the alignment head (a copy: it is changed).
        token_pairs: the whitespace tokens of the pairs to align.
        pairs, forced: their pieces and forced decodings (with states).
        background: gives the raw training pairs eflomal also learns from (read within the
            budget).
        minutes: the whole adaptation's budget.
        log: where the adaptation is announced.

    Returns:
        One line saying what was done.
    """
    start = time.monotonic()
    background = list(background())
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
