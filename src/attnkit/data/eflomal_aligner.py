"""eflomal (Östling & Tiedemann 2016), the classical word aligner, behind one function.

eflomal is an optional dependency (``pip install 'attnkit[align]'``), imported only when used.
It is a Bayesian IBM/HMM/fertility model fitted by Gibbs sampling on the sentence pairs it is
given, in both directions; like every classical aligner it aligns best when it is given much
parallel text besides the pairs to align. It has no seed: two runs can differ by a few links.

Example:
    ```python
    forward, reverse = eflomal_links([["the", "cat"]] * 3, [["le", "chat"]] * 3)
    forward[0]                                  # {(0, 0), (1, 1)}
    ```
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from attnkit.data.alignments import Links, read_pharaoh
from attnkit.errors import UsageError

INSTALL = "pip install 'attnkit[align]'"


def have_eflomal() -> bool:
    """Whether eflomal can be imported."""
    try:
        import eflomal  # noqa: F401
    except ImportError:
        return False
    return True


def eflomal_links(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]], *,
                  rel_iterations: float = 1.0, samplers: int = 3
                  ) -> tuple[list[Links], list[Links]]:
    """Align tokenized sentence pairs with eflomal, in both directions.

    Args:
        source, target: the tokens of each pair (no empty sentence; eflomal lowercases).
        rel_iterations: iterations relative to eflomal's defaults (which grow as the corpus
            shrinks).
        samplers: independent Gibbs samplers averaged.

    Returns:
        ``(forward, reverse)``: the links ``(source, target)`` of each pair from the
        source->target and target->source models.

    Raises:
        UsageError: eflomal is not installed; the two sides differ in length; an empty
            sentence.
    """
    try:
        from eflomal import Aligner
    except ImportError:
        raise UsageError(f"this needs eflomal, the classical word aligner: {INSTALL}") from None
    if len(source) != len(target):
        raise UsageError(f"{len(source)} source sentences but {len(target)} target sentences")
    for k, (s, t) in enumerate(zip(source, target, strict=True), 1):
        if not s or not t:
            raise UsageError(f"sentence pair {k} has an empty side: nothing to align")
    aligner = Aligner(n_samplers=samplers, rel_iterations=rel_iterations)
    with tempfile.TemporaryDirectory(prefix="attnkit-eflomal-") as tmp:
        fwd, rev = Path(tmp) / "fwd.txt", Path(tmp) / "rev.txt"
        aligner.align([" ".join(s) + "\n" for s in source], [" ".join(t) + "\n" for t in target],
                      links_filename_fwd=os.fspath(fwd), links_filename_rev=os.fspath(rev),
                      quiet=True)
        forward, reverse = read_pharaoh(fwd), read_pharaoh(rev)
    # eflomal writes no line for a trailing run of pairs without links: pad to the pairs.
    pad = [set() for _ in range(len(source) - len(forward))]
    pad_r = [set() for _ in range(len(source) - len(reverse))]
    return forward + pad, reverse + pad_r
