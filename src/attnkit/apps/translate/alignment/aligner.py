"""Word alignment of given sentence pairs with a translation run: the Python side of
``attnkit translate align``.

The pairs' whitespace tokens are written as the model's training text and cut into its
pieces (`attnkit.apps.translate.alignment.pieces`); the target is fed to the model (forced
decoding, `attnkit.decoding.forced`); a method (`attnkit.apps.translate.alignment.methods`)
gives piece matrices in one or both directions; these are gathered into word matrices and
links are extracted (`attnkit.data.link_extraction`). A run with a trained aligner
(``RUN/alignment``, written by ``attnkit translate align-train``) uses it with the settings
stored beside it, and by default first adapts it to the pairs
(`attnkit.apps.translate.alignment.adapt`), saying so; other runs use their attention averaged
over layers and heads.

Example:
    ```python
    result = align_pairs(loaded, [["the", "house"]], [["la", "maison"]])
    result.links[0]                     # {(0, 0), (1, 1)}
    result.words[0].shape               # (2, 2): [target words, source words]
    ```
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnkit.apps.base import Loaded, Log, stderr_log
from attnkit.apps.translate.alignment.head_files import load_head
from attnkit.apps.translate.alignment.methods import Method, piece_matrices
from attnkit.apps.translate.alignment.pieces import PairPieces, pair_pieces
from attnkit.data.alignments import Links
from attnkit.data.link_extraction import EXTRACTIONS, extract, word_scores
from attnkit.data.symmetrize import METHODS as SYMMETRIZATIONS
from attnkit.decoding.forced import forced_decode
from attnkit.errors import UsageError

# Runs without a trained aligner: the setting measured best for raw attention on the WPT03
# trial set (docs/results.md, "Word alignment").
ATTENTION_DEFAULT = {"method": Method("attention", layer="avg", head="avg", shift=False),
                     "extraction": "argmax", "symmetrize": "none", "threshold": 0.5}


@dataclass
class AlignResult:
    """What `align_pairs` found.

    Attributes:
        links: per pair, ``(source token, target token)`` links (0-based).
        words: per pair, the forward word matrix ``[target tokens, source tokens]`` the links
            were drawn from (each target token's weights over the source).
        method: the method and extraction used, in words.
        notes: what the user should know (adaptation, tokens cut off).
        pairs: the pairs as the model read them (pieces and which token each belongs to).
    """

    links: list[Links]
    words: list[np.ndarray]
    method: str
    notes: list[str] = field(default_factory=list)
    pairs: list[PairPieces] = field(default_factory=list)


def check_pairs(sources: Sequence[str], targets: Sequence[str], *,
                names: tuple[str, str] = ("the source", "the target")
                ) -> tuple[list[list[str]], list[list[str]]]:
    """The whitespace tokens of each line of two parallel texts.

    Raises:
        UsageError: different numbers of lines, or an empty line (named).
    """
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


def _settings(loaded: Loaded, given: dict[str, Any]) -> tuple[dict[str, Any], Any, dict]:
    """The settings used: the given ones over the run's aligner's defaults (or attention's)."""
    head, info = load_head(loaded.path) if loaded.trained_here else (None, None)
    if head is not None:
        stored = dict(info.get("defaults", {}))
        base = {"method": Method("head"), "extraction": stored.get("extraction", "argmax"),
                "symmetrize": stored.get("symmetrize", "intersection"),
                "threshold": stored.get("threshold", 0.5),
                "adapt": stored.get("adapt", True)}
    else:
        base = {**ATTENTION_DEFAULT, "adapt": False}
    settings = {**base, **{k: v for k, v in given.items() if v is not None}}
    if settings["extraction"] not in EXTRACTIONS:
        raise UsageError(f"--extraction must be one of {', '.join(EXTRACTIONS)}")
    if settings["symmetrize"] not in SYMMETRIZATIONS:
        raise UsageError(f"--symmetrize must be one of {', '.join(SYMMETRIZATIONS)}")
    return settings, head, info or {}


def check_attention(loaded: Loaded) -> None:
    """Refuse a run that cannot give links: no attention, or an exported CTranslate2 model."""
    if loaded.model is None:
        raise UsageError(f"{loaded.path}: an exported CTranslate2 model has no attention to "
                         "align with; use the training run")
    if getattr(loaded.model.config, "attention", None) == "none":
        raise UsageError(f"{loaded.path}: this model has no attention (attention='none'), so "
                         "it cannot align words; use a run with attention")


def align_pairs(loaded: Loaded, sources: Sequence[Sequence[str]],
                targets: Sequence[Sequence[str]], *, method: Method | None = None,
                extraction: str | None = None, threshold: float | None = None,
                symmetrize: str | None = None, adapt: bool | None = None,
                adapt_minutes: float = 10.0, adapt_data: str | None = None,
                normalize: bool = True, log: Log = stderr_log) -> AlignResult:
    """Align the whitespace tokens of sentence pairs (module doc).

    Args:
        loaded: a translate run (`attnkit.apps.translate.load_run`).
        sources, targets: each pair's tokens (`check_pairs`).
        method: where links come from (None: the run's trained aligner, else attention
            averaged over layers and heads).
        extraction: ``"argmax"`` or ``"threshold"`` (None: the run's default).
        threshold: the least weight linked with ``"threshold"``.
        symmetrize: how the two directions combine (``"none"``, ``"intersection"``,
            ``"union"``, ``"grow-diag-final-and"``).
        adapt: fit the trained aligner to these pairs first (None: the run's default).
        adapt_minutes: the adaptation's time budget.
        adapt_data: raw training pairs for the adaptation's labels (None: the run's data).
        normalize: write the tokens as the model's training text (contractions, casing).
        log: where the adaptation is announced.

    Raises:
        UsageError: a run without attention; an unknown setting; the trained method on a run
            without one; pieces beyond what an option names.
    """
    check_attention(loaded)
    settings, head, info = _settings(loaded, {
        "method": method, "extraction": extraction, "threshold": threshold,
        "symmetrize": symmetrize, "adapt": adapt})
    method = settings["method"]
    pairs = [pair_pieces(loaded.pipeline, s, t, normalize=normalize)
             for s, t in zip(sources, targets, strict=True)]
    notes = []
    cut = sum(p.cut for p in pairs)
    if cut:
        notes.append(f"{cut} tokens lie beyond the {loaded.pipeline.max_source} pieces the "
                     "model reads and get no link")
    model = loaded.model
    forced = forced_decode(model, [p.src_ids for p in pairs], [p.tgt_ids for p in pairs],
                           keep_states=method.kind == "head", logprobs=False)
    if method.kind == "head" and settings["adapt"] and head is not None:
        from attnkit.apps.translate.alignment.adapt import adapt_head

        head = copy.deepcopy(head)
        notes.append(adapt_head(loaded, head, list(zip(sources, targets, strict=True)), pairs,
                                forced, minutes=adapt_minutes, data=adapt_data, log=log))
    if method.kind in ("attention", "rollout", "head"):
        matrices = piece_matrices(pairs, forced, method, head=head)
    else:
        from attnkit.apps.translate.attribution import attribution_matrices

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


def word_matrices(pair: PairPieces, fwd: np.ndarray, rev: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """A pair's piece matrices as word matrices ``[target tokens, source tokens]``."""
    n_tgt, n_src = len(pair.tgt_tokens), len(pair.src_tokens)
    w_fwd = word_scores(fwd, pair.tgt_owner, pair.src_owner, n_tgt, n_src)
    w_rev = None if rev is None else word_scores(rev, pair.tgt_owner, pair.src_owner, n_tgt,
                                                 n_src, target="sum", source="mean")
    return w_fwd, w_rev
