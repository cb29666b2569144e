"""Word alignment of given sentence pairs with a translation model (behind ``attnkit translate
align``): the pairs as the model's pieces (`attnkit.alignment.pieces`), the target fed, a
method's piece matrices (`attnkit.alignment.methods`) gathered into word matrices, and links
extracted (`attnkit.alignment.links`); a trained aligner may first be adapted to the pairs.
`eflomal_align` aligns them with eflomal alone."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from attnkit.alignment.eflomal import ALIGN_SAMPLERS, eflomal_word_links
from attnkit.alignment.links import EXTRACTIONS, SYMMETRIZATIONS, Links, extract, word_scores
from attnkit.alignment.methods import Method, attribution_matrices, piece_matrices
from attnkit.alignment.pieces import PairPieces, TranslatePipeline, pair_pieces
from attnkit.decoding.forced import forced_decode
from attnkit.errors import UsageError
from attnkit.models.alignment_head import AlignmentHead
from attnkit.settings import is_number

# Without a trained aligner: the setting measured best for raw attention on the WPT03 trial
# set (docs/results.md, "Word alignment").
ATTENTION_DEFAULT = {"method": Method("attention", layer="avg", head="avg", shift=False),
                     "extraction": "argmax", "symmetrize": "none", "threshold": 0.5}


@dataclass
class AlignResult:
    """What `align` found, per pair: the ``(source token, target token)`` links, the forward
    word matrix ``[target tokens, source tokens]`` they came from, and the pair as the model
    read it; the method in words, and notes for the user (adaptation, tokens cut off)."""

    links: list[Links]
    words: list[np.ndarray]
    method: str
    notes: list[str] = field(default_factory=list)
    pairs: list[PairPieces] = field(default_factory=list)


def check_pairs(sources: Sequence[str], targets: Sequence[str], *,
                names: tuple[str, str] = ("the source", "the target")
                ) -> tuple[list[list[str]], list[list[str]]]:
    """The whitespace tokens of each line of two parallel texts; UsageError names a missing
    or empty line."""
    if len(sources) != len(targets):
        raise UsageError(f"{names[0]} has {len(sources)} lines but {names[1]} has "
                         f"{len(targets)}: they must be sentence pairs, line by line")
    if not sources:
        raise UsageError("no sentence pair given: nothing to align")
    out = ([], [])
    for k, (s, t) in enumerate(zip(sources, targets, strict=True), 1):
        for side, line, name in ((0, s, names[0]), (1, t, names[1])):
            tokens = line.split()
            if not tokens:
                raise UsageError(f"line {k} of {name} is empty: every line must be a "
                                 "sentence to align")
            out[side].append(tokens)
    return out


def align(model: nn.Module, pipeline: TranslatePipeline, sources: Sequence[Sequence[str]],
          targets: Sequence[Sequence[str]], settings: dict[str, Any], *,
          head: AlignmentHead | None = None,
          adapt: Callable[[AlignmentHead, list, list[PairPieces], list], str] | None = None,
          normalize: bool = True) -> AlignResult:
    """Align the whitespace tokens of sentence pairs (`check_pairs`) with ``model``.

    Args:
        settings: ``{"method"`` (a `Method`), ``"extraction"`` (``"argmax"`` or ``"threshold"``),
            ``"threshold"``, ``"symmetrize"`` (one of `SYMMETRIZATIONS`)``}``
            (`ATTENTION_DEFAULT`).
        head: the trained aligner, for the ``"head"`` method; ``adapt(head, token_pairs, pairs,
            forced) -> note`` fits a copy of it to the pairs first (`adapt_head`).
        normalize: write the tokens as the model's training text (contractions, casing).

    Raises:
        UsageError: a bad extraction, symmetrisation or threshold; the head method without a
            head; a layer or head the model does not have.
    """
    if settings["extraction"] not in EXTRACTIONS:
        raise UsageError(f"--extraction must be one of {', '.join(EXTRACTIONS)}")
    threshold = settings["threshold"]
    # NaN compares false with every weight (no link at all, silently); inf the same.
    if not (is_number(threshold) and math.isfinite(threshold)):
        raise UsageError(f"--threshold must be a finite number, got {threshold!r}")
    if settings["symmetrize"] not in SYMMETRIZATIONS:
        raise UsageError(f"--symmetrize must be one of {', '.join(SYMMETRIZATIONS)}")
    method = settings["method"]
    pairs = [pair_pieces(pipeline, s, t, normalize=normalize)
             for s, t in zip(sources, targets, strict=True)]
    notes = []
    cut = sum(p.cut for p in pairs)
    if cut:
        notes.append(f"{cut} tokens lie beyond the {pipeline.max_source} pieces the model "
                     "reads and get no link")
    forced = forced_decode(model, [p.src_ids for p in pairs], [p.tgt_ids for p in pairs],
                           keep_states=method.kind == "head", logprobs=False)
    if method.kind == "head" and adapt is not None and head is not None:
        head = copy.deepcopy(head)
        notes.append(adapt(head, list(zip(sources, targets, strict=True)), pairs, forced))
    if method.kind in ("attention", "rollout", "head"):
        matrices = piece_matrices(pairs, forced, method, head=head)
    else:
        matrices = attribution_matrices(model, pairs, method.kind)
    links, words = [], []
    for pair, (fwd, rev) in zip(pairs, matrices, strict=True):
        w_fwd, w_rev = word_matrices(pair, fwd.numpy(), rev.numpy() if rev is not None else None)
        links.append(extract(w_fwd, w_rev, settings["extraction"],
                             threshold=settings["threshold"],
                             symmetrize=settings["symmetrize"]))
        words.append(w_fwd)
    name = (f"{method.name()}, {settings['extraction']}"
            + (f" >= {settings['threshold']:g}" if settings["extraction"] == "threshold" else "")
            + (f", {settings['symmetrize']}" if settings["symmetrize"] != "none" else ""))
    return AlignResult(links, words, name, notes, pairs)


def eflomal_align(sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                  background: Sequence[tuple[str, str]], symmetrize: str) -> AlignResult:
    """Align the whitespace tokens of sentence pairs (`check_pairs`) with eflomal alone, fitted
    on them and the raw ``background`` pairs, its two directions combined by ``symmetrize``
    (``"none"``: the forward one). The word matrices hold the links as 0/1; no model is read.
    """
    if symmetrize not in SYMMETRIZATIONS:
        raise UsageError(f"--symmetrize must be one of {', '.join(SYMMETRIZATIONS)}")
    how = "forward" if symmetrize == "none" else symmetrize
    start = time.monotonic()
    links = eflomal_word_links(list(zip(sources, targets, strict=True)), background=background,
                               methods=(how,), samplers=ALIGN_SAMPLERS)[how]
    words = []
    for s, t, found in zip(sources, targets, links, strict=True):
        w = np.zeros((len(t), len(s)), dtype=np.float32)
        for i, j in found:
            w[j, i] = 1.0
        words.append(w)
    note = (f"eflomal ({ALIGN_SAMPLERS} samplers) on the {len(sources)} pairs and "
            f"{len(background):,} training pairs, {time.monotonic() - start:.0f} s")
    return AlignResult(links, words, f"eflomal, {how}", [note])


def word_matrices(pair: PairPieces, fwd: np.ndarray, rev: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """A pair's piece matrices as word matrices ``[target tokens, source tokens]``."""
    n_tgt, n_src = len(pair.tgt_tokens), len(pair.src_tokens)
    w_fwd = word_scores(fwd, pair.tgt_owner, pair.src_owner, n_tgt, n_src)
    w_rev = None if rev is None else word_scores(rev, pair.tgt_owner, pair.src_owner, n_tgt,
                                                 n_src, target="sum", source="mean")
    return w_fwd, w_rev
