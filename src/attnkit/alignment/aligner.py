"""Word alignment of given sentence pairs (behind ``attnkit translate align``): start at `align`.

The pairs are written as the model's pieces (`pair_pieces`; ``pipeline``: the run's
`attnkit.apps.translate.pipeline.TranslatePipeline`), the target fed (forced decoding), a
`Method`'s piece matrices gathered into word matrices and links extracted
(`attnkit.alignment.links`). `eflomal_align` aligns with eflomal alone (``pip install
'attnkit[align]'``: Bayesian IBM/HMM models fitted by Gibbs sampling, a run's training pairs as
background; no seed), which also labels the training pairs of an ``--align-loss`` run
(`eflomal_labels`, `piece_links`)."""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from attnkit.alignment.links import (
    EXTRACTIONS,
    SYMMETRIZATIONS,
    Links,
    extract,
    read_pharaoh,
    symmetrize,
    word_scores,
)
from attnkit.alignment.text import Span, aligner_tokens, pieces_to_tokens, surface
from attnkit.attention.rollout import rollout_cross
from attnkit.data.text_codec import SRC_LANG, TGT_LANG
from attnkit.decoding.forced import Forced, forced_decode, teacher_forced_logprobs
from attnkit.errors import UsageError
from attnkit.explain.captum import grad_x_input, integrated_gradients
from attnkit.settings import is_number

# The links eflomal's two directions are combined into for labels (measured on the WPT03
# trial set: docs/results.md, "Word alignment").
LABEL_SYMMETRIZATION = "grow-diag-final-and"
# Gibbs samplers averaged when aligning given pairs (`translate align`): more samplers gave
# fewer errors on the WPT03 trial set, at about 3x the time of eflomal's default 3
# (docs/results.md, "Word alignment"). Labelling a whole corpus keeps 3 for its budget.
ALIGN_SAMPLERS = 12
# Integrated gradients: points on the path from the zero baseline (Gauss-Legendre). Each point
# costs a forward and backward pass per target piece, so a 40-piece sentence is 16 x 40 rows;
# tests/apps/translate/test_align.py checks completeness on a small model.
IG_STEPS = 16
# Tokens one forward and backward pass holds (rows x (source + target pieces)): each row is
# the whole pair, so a pass over every row at once grew with the square of its length (a
# 200-token pair took 7.5 GB). The memory bound of a gradient method (docs/guide/translate.md).
ATTRIBUTION_TOKENS = 8192


@dataclass
class PairPieces:
    """One pair for forced decoding: the tokens links refer to, the model's ids (at most
    ``max_source`` each), each piece's token indices (``*_owner``), and the tokens left without
    a piece (``cut``)."""

    src_tokens: list[str]
    tgt_tokens: list[str]
    src_ids: list[int]
    tgt_ids: list[int]
    src_owner: list[list[int]]
    tgt_owner: list[list[int]]
    cut: int = 0


def _pieces(pipeline: Any, texts: Sequence[str],
            spans: Sequence[Sequence[Span]], tokens: Sequence[Sequence[str]]) -> PairPieces:
    """A `PairPieces` from the model's two texts, each token's span in them, and the tokens."""
    ids, owners, cut = [], [], 0
    for text, where, lang, vocab in zip(texts, spans, (SRC_LANG, TGT_LANG),
                                        (pipeline.src_vocab, pipeline.tgt_vocab), strict=True):
        pieces, piece_spans = pipeline.codec.encode_with_spans(text, lang)
        owner = pieces_to_tokens(piece_spans[:pipeline.max_source], where)
        ids.append(vocab.encode(pieces[:pipeline.max_source]))
        owners.append(owner)
        cut += len(where) - len({k for words in owner for k in words})
    return PairPieces(list(tokens[0]), list(tokens[1]), ids[0], ids[1], owners[0], owners[1],
                      cut)


def pair_pieces(pipeline: Any, src_tokens: Sequence[str],
                tgt_tokens: Sequence[str], *, normalize: bool = True) -> PairPieces:
    """Whitespace tokens to align, as the model reads them: written as its training text
    (``normalize``, `attnkit.alignment.text.surface`; False joins them as they are)."""
    texts, spans = [], []
    for tokens, lang in ((src_tokens, SRC_LANG), (tgt_tokens, TGT_LANG)):
        text = " ".join(tokens)
        text, where = surface(tokens, lang) if normalize else (
            text, [m.span() for m in re.finditer(r"\S+", text)])
        texts.append(text)
        spans.append(where)
    return _pieces(pipeline, texts, spans, (src_tokens, tgt_tokens))


def raw_pieces(pipeline: Any, source: str, target: str) -> PairPieces:
    """A raw training pair, its tokens those of the aligner (`aligner_tokens`)."""
    src, tgt = aligner_tokens(source, SRC_LANG), aligner_tokens(target, TGT_LANG)
    return _pieces(pipeline, (source, target), ([s for _, s in src], [s for _, s in tgt]),
                   ([w for w, _ in src], [w for w, _ in tgt]))


def unknown_shares(pipeline: Any, sources: Sequence[Sequence[str]],
                  targets: Sequence[Sequence[str]], *, normalize: bool = True
                  ) -> tuple[float, float]:
    """The shares of the source and of the target words the run's vocabularies do not hold (a
    word with an ``<unk>`` piece; words beyond what the model reads are not counted): where
    it is high, the model's links are little better than guesses."""
    pairs = [pair_pieces(pipeline, s, t, normalize=normalize)
             for s, t in zip(sources, targets, strict=True)]
    shares = []
    for side, vocab in (("src", pipeline.src_vocab), ("tgt", pipeline.tgt_vocab)):
        seen = unknown = 0
        for pair in pairs:
            words: dict[int, bool] = {}
            for piece, owners in zip(getattr(pair, f"{side}_ids"), getattr(pair, f"{side}_owner"),
                                     strict=True):
                for w in owners:
                    words[w] = words.get(w, False) or piece == vocab.unk_id
            seen, unknown = seen + len(words), unknown + sum(words.values())
        shares.append(unknown / seen if seen else 0.0)
    return shares[0], shares[1]


@dataclass(frozen=True)
class Method:
    """Where the links come from: ``kind`` ``"attention"`` (``layer`` and ``head`` 0-based or
    ``"avg"``), ``"rollout"`` (cross-attention times the encoder's rolled-out self-attention),
    ``"grad-input"``, ``"integrated-gradients"`` or
    ``"eflomal"`` (no model); ``shift``: read the attention at the step that reads the target
    piece (Chen et al. 2020), not the one that predicts it."""

    kind: str = "attention"
    layer: int | str = "avg"
    head: int | str = "avg"
    shift: bool = False

    def name(self) -> str:
        """A short name for tables (``attention L2 avg shift``)."""
        if self.kind == "rollout":
            return "attention rollout" + (" shift" if self.shift else "")
        if self.kind != "attention":
            return self.kind
        layer = "layers avg" if self.layer == "avg" else f"L{int(self.layer) + 1}"
        head = "heads avg" if self.head == "avg" else f"H{int(self.head) + 1}"
        return f"attention {layer} {head}" + (" shift" if self.shift else "")


# The setting measured best for raw attention (no --align-loss) on the WPT03 trial
# set (docs/results.md, "Word alignment").
ATTENTION_DEFAULT = {"method": Method(), "extraction": "argmax", "symmetrize": "none",
                     "threshold": 0.5}


def attention_rows(forced: Forced, method: Method, n: int) -> Tensor:
    """``[n, S]``: the chosen layer and head of a forced decoding, one row per target piece."""
    w = forced.attention                                      # [L, H, n + 1, S]
    layers, heads = w.shape[:2]
    for what, value, size in (("layer", method.layer, layers), ("head", method.head, heads)):
        if value != "avg" and not (isinstance(value, int) and 0 <= value < size):
            raise UsageError(f"--{what} {value if value == 'avg' else int(value) + 1}: this "
                             f"model has {size} {what}s (1 to {size}, or avg)")
    w = w.mean(0) if method.layer == "avg" else w[method.layer]
    w = w.mean(0) if method.head == "avg" else w[method.head]
    return w[1:n + 1] if method.shift else w[:n]


def rollout_rows(forced: Forced, shift: bool, n: int) -> Tensor:
    """``[n, S]``: the cross-attention rolled out through the encoder (an RNN, which has no
    encoder attention: its attention)."""
    w = forced.attention
    rows = w.mean((0, 1)) if forced.encoder is None else rollout_cross(
        list(w[:, None]), list(forced.encoder[:, None]))[0]
    return rows[1:n + 1] if shift else rows[:n]


def attribution_rows(model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int],
                     method: str, *, steps: int = IG_STEPS, signed: bool = False) -> Tensor:
    """``[n, S]``: how much each source piece's embedding decided each target piece's
    log-probability (the target before it fed; one batch row per piece), by ``method``
    (``"grad-input"`` or ``"integrated-gradients"``, `attnkit.explain.captum`), summed over the
    embedding and normalised per target piece in magnitude (``signed``: the raw sums);
    ``tgt_ids`` without ``<bos>``/``<eos>``. UsageError: no Captum."""

    def forward(embedded: Tensor, src: Tensor, lengths: Tensor, tgt_in: Tensor,
                gold: Tensor) -> Tensor:
        state = model.encode(src, lengths, beams=1, use_cache=False, weights="none",
                             embedded=embedded)
        logp = teacher_forced_logprobs(model, state, tgt_in)
        return logp.gather(-1, gold.unsqueeze(-1))[..., 0]        # [batch, T]

    c = model.config
    device = next(model.parameters()).device
    n = len(tgt_ids)
    if n == 0:
        return torch.zeros(0, len(src_ids))
    src = torch.tensor([list(src_ids)], device=device).expand(n, -1)
    lengths = torch.full((n,), len(src_ids), device=device)
    tgt_in = torch.tensor([[c.bos_id, *tgt_ids[:-1]]], device=device).expand(n, -1)
    gold = torch.tensor([list(tgt_ids)], device=device).expand(n, -1)
    embedded = model.source_embedding(src).detach()                   # [n, S, e]
    args, target = (src, lengths, tgt_in, gold), list(range(n))
    rows = max(1, ATTRIBUTION_TOKENS // (len(src_ids) + n))
    if method == "grad-input":
        attr = grad_x_input(forward, embedded, target=target, args=args, max_rows=rows)
    else:
        attr, _ = integrated_gradients(forward, embedded, target=target, args=args,
                                       steps=steps, internal_batch_size=rows)
    summed = attr.sum(-1).float().cpu()                                # [n, S]
    if signed:
        return summed
    mag = summed.abs()
    return mag / mag.sum(-1, keepdim=True).clamp_min(1e-12)


@torch.no_grad()
def piece_matrices(pairs: Sequence[PairPieces], forced: Sequence[Forced], method: Method, *,
                   model: nn.Module | None = None) -> list[tuple[Tensor, Tensor]]:
    """Each pair's forward and reverse piece matrices ``[n, S]`` by ``method`` (not eflomal;
    ``model``: the one a gradient method reads); UsageError for a layer or head the model
    lacks."""
    out = []
    for pair, f in zip(pairs, forced, strict=True):
        n = len(pair.tgt_ids)
        if method.kind == "rollout":
            fwd = rollout_rows(f, method.shift, n)
        elif method.kind == "attention":
            fwd = attention_rows(f, method, n)
        else:
            fwd = attribution_rows(model, pair.src_ids, pair.tgt_ids, method.kind)
        out.append((fwd, fwd / fwd.sum(0, keepdim=True).clamp_min(1e-12)))
    return out


def eflomal_links(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]], *,
                  samplers: int = 3) -> tuple[list[Links], list[Links]]:
    """eflomal's links ``(source, target)`` of tokenized pairs (no empty side), from the
    source->target and the target->source model: ``(forward, reverse)``; ``samplers`` Gibbs
    samplers are averaged."""
    try:
        from eflomal import Aligner
    except ImportError:
        raise UsageError("this needs eflomal, the classical word aligner: pip install "
                         "'attnkit[align]'") from None
    with tempfile.TemporaryDirectory(prefix="attnkit-eflomal-") as tmp:
        fwd, rev = Path(tmp) / "fwd.txt", Path(tmp) / "rev.txt"
        Aligner(n_samplers=samplers).align(
            [" ".join(s) + "\n" for s in source], [" ".join(t) + "\n" for t in target],
            links_filename_fwd=os.fspath(fwd), links_filename_rev=os.fspath(rev), quiet=True)
        found = read_pharaoh(fwd), read_pharaoh(rev)
    # eflomal writes no line for a trailing run of pairs without links: pad to the pairs.
    return tuple(links + [set() for _ in range(len(source) - len(links))] for links in found)


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


def eflomal_word_links(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *,
                       background: Sequence[tuple[str, str]] = (),
                       methods: Sequence[str] = (LABEL_SYMMETRIZATION,), samplers: int = 3
                       ) -> dict[str, list[Links]]:
    """eflomal's links ``(source token, target token)`` of whitespace-token ``pairs``, fitted
    together with the raw ``background`` pairs, its two directions combined each way of
    ``methods``: ``"forward"``, ``"reverse"`` or a symmetrisation (`SYMMETRIZATIONS`)."""
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


@dataclass
class AlignResult:
    """What `align` found, per pair: the ``(source token, target token)`` links, the forward
    word matrix ``[target tokens, source tokens]`` they came from, and the pair as the model
    read it; the method in words, and notes for the user (eflomal's time, tokens cut off)."""

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


def align(model: nn.Module, pipeline: Any, sources: Sequence[Sequence[str]],
          targets: Sequence[Sequence[str]], settings: dict[str, Any], *,
          normalize: bool = True) -> AlignResult:
    """Align the whitespace tokens of sentence pairs (`check_pairs`) with ``model``:
    ``settings`` as `ATTENTION_DEFAULT` (a `Method`, an extraction of `EXTRACTIONS`, a
    threshold, one of `SYMMETRIZATIONS`); ``normalize``: write the tokens as the model's
    training text.
    UsageError: bad settings, or a layer or head the model does not have."""
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
    cut = sum(p.cut for p in pairs)
    notes = [f"{cut} tokens lie beyond the {pipeline.max_source} pieces the model reads and "
             "get no link"] if cut else []
    forced = forced_decode(model, [p.src_ids for p in pairs], [p.tgt_ids for p in pairs],
                           logprobs=False)
    links, words = [], []
    for pair, (fwd, rev) in zip(pairs, piece_matrices(pairs, forced, method, model=model),
                                strict=True):
        w_fwd, w_rev = word_matrices(pair, fwd.numpy(), rev.numpy())
        links.append(extract(w_fwd, w_rev, settings["extraction"], threshold=threshold,
                             symmetrize=settings["symmetrize"]))
        words.append(w_fwd)
    name = (f"{method.name()}, {settings['extraction']}"
            + (f" >= {threshold:g}" if settings["extraction"] == "threshold" else "")
            + (f", {settings['symmetrize']}" if settings["symmetrize"] != "none" else ""))
    return AlignResult(links, words, name, notes, pairs)


def eflomal_align(sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                  background: Sequence[tuple[str, str]], symmetrize: str) -> AlignResult:
    """Align the whitespace tokens of sentence pairs (`check_pairs`) with eflomal alone, fitted
    on them and the raw ``background`` pairs, its two directions combined by ``symmetrize``
    (``"none"``: the forward one). The word matrices hold the links as 0/1."""
    if symmetrize not in SYMMETRIZATIONS:
        raise UsageError(f"--symmetrize must be one of {', '.join(SYMMETRIZATIONS)}")
    how = "forward" if symmetrize == "none" else symmetrize
    start = time.monotonic()
    links = eflomal_word_links(list(zip(sources, targets, strict=True)), background=background,
                               methods=(how,), samplers=ALIGN_SAMPLERS)[how]
    words = [np.zeros((len(t), len(s)), dtype=np.float32)
             for s, t in zip(sources, targets, strict=True)]
    for w, found in zip(words, links, strict=True):
        for i, j in found:
            w[j, i] = 1.0
    note = (f"eflomal ({ALIGN_SAMPLERS} samplers) on the {len(sources)} pairs and "
            f"{len(background):,} training pairs, {time.monotonic() - start:.0f} s")
    return AlignResult(links, words, f"eflomal, {how}", [note])


def word_matrices(pair: PairPieces, fwd: np.ndarray, rev: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A pair's piece matrices as word matrices ``[target tokens, source tokens]``."""
    n_tgt, n_src = len(pair.tgt_tokens), len(pair.src_tokens)
    return (word_scores(fwd, pair.tgt_owner, pair.src_owner, n_tgt, n_src),
            word_scores(rev, pair.tgt_owner, pair.src_owner, n_tgt, n_src, target="sum",
                        source="mean"))


def eflomal_labels(pipeline: Any, corpus: Sequence[tuple[str, str]]
                   ) -> tuple[list[PairPieces], list[Links]]:
    """Each raw ``corpus`` pair as the model's pieces (`raw_pieces`) and its word links:
    eflomal fitted on every pair with words on both sides (the others get none), its two
    directions combined by `LABEL_SYMMETRIZATION` (what the alignment loss learns). eflomal
    has no seed: two fits differ by a few links."""
    words = [(_words(en, SRC_LANG), _words(fr, TGT_LANG)) for en, fr in corpus]
    fitted = [k for k, (e, f) in enumerate(words) if e and f]
    forward, reverse = eflomal_links([words[k][0] for k in fitted], [words[k][1] for k in fitted])
    row = {k: i for i, k in enumerate(fitted)}
    return ([raw_pieces(pipeline, *pair) for pair in corpus],
            [symmetrize(forward[row[k]], reverse[row[k]], LABEL_SYMMETRIZATION) if k in row
             else set() for k in range(len(corpus))])


def piece_links(pair: PairPieces, links: Links) -> list[tuple[int, int]]:
    """``(target piece, source piece)`` index pairs, sorted: a piece pair is linked when a
    token of each is."""
    def pieces_of(owner: list[list[int]]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for piece, tokens in enumerate(owner):
            for token in tokens:
                out.setdefault(token, []).append(piece)
        return out
    src, tgt = pieces_of(pair.src_owner), pieces_of(pair.tgt_owner)
    return sorted({(t, s) for i, j in links for s in src.get(i, ()) for t in tgt.get(j, ())})
