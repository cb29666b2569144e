"""eflomal (Östling & Tiedemann 2016), the classical word aligner, and its links as the labels
of the trained aligner, in the pieces a model reads.

eflomal (``pip install 'attnkit[align]'``, imported when used) is a Bayesian IBM/HMM model
fitted by Gibbs sampling in both directions on the pairs with a run's training pairs as
background (`eflomal_labels`; it has no seed); `piece_labels` turns its links into the 0/1
piece matrix `attnkit.models.alignment_head.alignment_loss` expects."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from attnkit.alignment.links import Links, read_pharaoh, symmetrize
from attnkit.alignment.pieces import PairPieces
from attnkit.alignment.text import aligner_tokens
from attnkit.data.text_codec import SRC_LANG, TGT_LANG
from attnkit.errors import UsageError

INSTALL = "pip install 'attnkit[align]'"


def eflomal_links(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]], *,
                  rel_iterations: float = 1.0, samplers: int = 3
                  ) -> tuple[list[Links], list[Links]]:
    """eflomal's links ``(source, target)`` of tokenized pairs (no empty side), from the
    source->target and the target->source model: ``(forward, reverse)``. ``rel_iterations``
    scales eflomal's iterations; ``samplers`` Gibbs samplers are averaged."""
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
    return (forward + [set() for _ in range(len(source) - len(forward))],
            reverse + [set() for _ in range(len(source) - len(reverse))])


# The links eflomal's two directions are combined into for labels (measured on the WPT03
# trial set: docs/results.md, "Word alignment").
LABEL_SYMMETRIZATION = "grow-diag-final-and"
# Gibbs samplers averaged when aligning given pairs (`translate align`): more samplers gave
# fewer errors on the WPT03 trial set, at about 3x the time of eflomal's default 3
# (docs/results.md, "Word alignment"). Labelling a whole corpus keeps 3 for its budget.
ALIGN_SAMPLERS = 12


def _words(text: str, lang: str) -> list[str]:
    return [w for w, _ in aligner_tokens(text, lang)]


def _split(tokens: Sequence[str], lang: str) -> tuple[list[str], list[int]]:
    """Whitespace tokens split as the aligner reads them, and each piece's token."""
    words, owner = [], []
    for k, tok in enumerate(tokens):
        parts = _words(tok, lang) or [tok.lower()]
        words += parts
        owner += [k] * len(parts)
    return words, owner


def eflomal_labels(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *,
                   background: Sequence[tuple[str, str]] = (),
                   method: str = LABEL_SYMMETRIZATION, samplers: int = 3) -> list[Links]:
    """eflomal's symmetrised links ``(source token, target token)`` of whitespace-token
    ``pairs``, fitted together with the raw ``background`` pairs."""
    return eflomal_word_links(pairs, background=background, methods=(method,),
                              samplers=samplers)[method]


def eflomal_word_links(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *,
                       background: Sequence[tuple[str, str]] = (),
                       methods: Sequence[str] = (LABEL_SYMMETRIZATION,), samplers: int = 3
                       ) -> dict[str, list[Links]]:
    """`eflomal_labels` for several ways of combining the two directions from one eflomal
    fit: ``"forward"``, ``"reverse"`` or a symmetrisation (`attnkit.alignment.links`)."""
    split = [(_split(s, SRC_LANG), _split(t, TGT_LANG)) for s, t in pairs]
    extra = [(e, f) for e, f in ((_words(en, SRC_LANG), _words(fr, TGT_LANG))
                                 for en, fr in background) if e and f]
    forward, reverse = eflomal_links([s[0] for s, _ in split] + [e for e, _ in extra],
                                     [t[0] for _, t in split] + [f for _, f in extra],
                                     samplers=samplers)
    out: dict[str, list[Links]] = {}
    for method in methods:
        found = [forward[k] if method == "forward" else reverse[k] if method == "reverse"
                 else symmetrize(forward[k], reverse[k], method) for k in range(len(split))]
        out[method] = [{(s[1][i], t[1][j]) for i, j in links}
                       for links, (s, t) in zip(found, split, strict=True)]
    return out


def raw_labels(pairs: Sequence[tuple[str, str]], method: str = LABEL_SYMMETRIZATION
               ) -> list[Links]:
    """eflomal's links of raw pairs, between their aligner tokens (`aligner_tokens`)."""
    forward, reverse = eflomal_links([_words(en, SRC_LANG) for en, _ in pairs],
                                     [_words(fr, TGT_LANG) for _, fr in pairs])
    return [symmetrize(f, r, method) for f, r in zip(forward, reverse, strict=True)]


def piece_labels(pair: PairPieces, links: Links) -> torch.Tensor:
    """``[target pieces, source pieces]`` 0/1: a piece pair is labelled when a token of each
    is linked."""
    y = torch.zeros(len(pair.tgt_owner), len(pair.src_owner))
    for r, tgt_words in enumerate(pair.tgt_owner):
        for q, src_words in enumerate(pair.src_owner):
            if any((i, j) in links for i in src_words for j in tgt_words):
                y[r, q] = 1.0
    return y
