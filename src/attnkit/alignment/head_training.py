"""Training an alignment head on labelled pairs: the frozen translation model's forced decoding
gives the head's inputs once, then the head alone is fitted. `train_head` does it from raw
training pairs (eflomal's links as labels, within a time budget); `adapt_head` fine-tunes a
head on eflomal's links of the pairs it is asked to align (no gold link used). A head on
disk is a folder: ``head.safetensors`` and ``head.json`` (`write_head`, `read_head`)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.alignment.aligner import (
    ALIGN_SAMPLERS,
    LABEL_SYMMETRIZATION,
    PairPieces,
    TranslatePipeline,
    eflomal_word_links,
    head_inputs,
    raw_labels,
    raw_pieces,
)
from attnkit.alignment.links import Links
from attnkit.decoding.forced import Forced, forced_decode
from attnkit.errors import CheckpointError
from attnkit.fileio import read_json_object, write_json
from attnkit.models.alignment_head import AlignmentHead, AlignmentHeadConfig, alignment_loss
from attnkit.training import load_weights, save_weights

WEIGHTS, INFO = "head.safetensors", "head.json"


@dataclass
class HeadExample:
    """One pair's head inputs and labels: ``query [n, d]``, ``memory [S, d]``,
    ``features [n, S, F]``, ``labels [n, S]``."""

    query: Tensor
    memory: Tensor
    features: Tensor
    labels: Tensor


def head_examples(layer: int, pairs: Sequence[PairPieces], forced: Sequence[Forced],
                  labels: Sequence[Tensor]) -> list[HeadExample]:
    """Labelled pairs' head inputs, from their forced decodings (states kept)."""
    return [HeadExample(*head_inputs(layer, f, len(p.tgt_ids), len(p.src_ids)), y)
            for p, f, y in zip(pairs, forced, labels, strict=True)]


def piece_labels(pair: PairPieces, links: Links) -> Tensor:
    """``[target pieces, source pieces]`` 0/1: a piece pair is labelled when a token of each
    is linked."""
    y = torch.zeros(len(pair.tgt_owner), len(pair.src_owner))
    for r, tgt_words in enumerate(pair.tgt_owner):
        for q, src_words in enumerate(pair.src_owner):
            if any((i, j) in links for i in src_words for j in tgt_words):
                y[r, q] = 1.0
    return y


def _batch(examples: Sequence[HeadExample]) -> tuple[Tensor, ...]:
    n = max(e.query.shape[0] for e in examples)
    s = max(e.memory.shape[0] for e in examples)
    b, d, f = len(examples), examples[0].query.shape[1], examples[0].features.shape[-1]
    query, memory = torch.zeros(b, n, d), torch.zeros(b, s, d)
    feats, labels = torch.zeros(b, n, s, f), torch.zeros(b, n, s)
    src_mask = torch.zeros(b, s, dtype=torch.bool)
    tgt_mask = torch.zeros(b, n, dtype=torch.bool)
    for k, e in enumerate(examples):
        ni, si = e.query.shape[0], e.memory.shape[0]
        query[k, :ni], memory[k, :si] = e.query, e.memory
        feats[k, :ni, :si], labels[k, :ni, :si] = e.features, e.labels
        src_mask[k, :si], tgt_mask[k, :ni] = True, True
    return query, memory, feats, labels, src_mask, tgt_mask


def fit_head(head: AlignmentHead, examples: Sequence[HeadExample], *,
             seconds: float | None = None, epochs: int = 20, lr: float = 2e-3,
             batch_size: int = 32, seed: int = 0, log: Callable[[str], None] | None = None
             ) -> dict[str, float]:
    """Fit ``head`` (in place) to its examples' labels (AdamW, batches of similar length, in
    an order drawn from ``seed``), for at most ``epochs`` passes and ``seconds`` (None: no
    limit); ``log`` gets a line per epoch. Returns ``{"steps", "epochs", "seconds", "loss"}``
    (the last epoch's mean loss)."""
    labelled = [e for e in examples if e.labels.any()]
    if not labelled:
        return {"steps": 0, "epochs": 0, "seconds": 0.0, "loss": float("nan")}
    rng = random.Random(seed)
    order = sorted(range(len(labelled)), key=lambda k: labelled[k].features.shape[:2])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)
    head.train()
    start, steps, loss_sum, done, epoch = time.monotonic(), 0, 0.0, 0, 0
    for epoch in range(1, epochs + 1):
        rng.shuffle(batches)
        loss_sum, done = 0.0, 0
        for rows in batches:
            *inputs, labels, src_mask, tgt_mask = _batch([labelled[k] for k in rows])
            scores = head(*inputs, src_mask, tgt_mask)
            loss = alignment_loss(scores, labels, src_mask, tgt_mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum, done, steps = loss_sum + loss.item(), done + 1, steps + 1
            if out_of_time := seconds is not None and time.monotonic() - start > seconds:
                break
        if log is not None:
            log(f"alignment head: epoch {epoch}, loss {loss_sum / done:.4f}, "
                f"{time.monotonic() - start:.0f} s")
        if out_of_time:
            break
    head.eval()
    return {"steps": steps, "epochs": epoch, "seconds": round(time.monotonic() - start, 1),
            "loss": loss_sum / max(done, 1)}


def train_head(model: nn.Module, pipeline: TranslatePipeline,
               corpus: Sequence[tuple[str, str]], *, pairs: int = 20000, seconds: float = 120.0,
               layer: int = -1, seed: int = 0, log: Callable[[str], None] | None = None
               ) -> tuple[AlignmentHead, dict]:
    """A head for a Transformer ``model``, trained on eflomal's links of raw ``corpus`` pairs
    (eflomal learns from all; ``pairs`` of them, sampled by ``seed``, label the head) within
    ``seconds`` in all; ``layer``: the decoder layer it reads (-1: the last).

    Returns:
        The head (eval mode) and how it was trained (``{"steps", "epochs", "seconds", "loss",
        "pairs", "eflomal_pairs", "labels", "total_seconds"}``).
    """
    start, say = time.monotonic(), log or (lambda _: None)
    c = model.config
    corpus = [(en, fr) for en, fr in corpus if en.strip() and fr.strip()]
    say(f"aligner: eflomal on {len(corpus):,} training pairs")
    links = raw_labels(corpus, LABEL_SYMMETRIZATION)
    chosen = random.Random(seed).sample(range(len(corpus)), min(pairs, len(corpus)))
    pieces = [raw_pieces(pipeline, *corpus[k]) for k in chosen]
    labels = [piece_labels(p, links[k]) for p, k in zip(pieces, chosen, strict=True)]
    config = AlignmentHeadConfig(d_model=c.d_model, layers=c.layers, heads=c.heads, layer=layer)
    say(f"aligner: labels ready ({time.monotonic() - start:.0f} s); forced decoding of "
        f"{len(pieces):,} pairs")
    examples = []
    for k in range(0, len(pieces), 512):   # bounded memory: states of 512 pairs at a time
        chunk = pieces[k:k + 512]
        forced = forced_decode(model, [p.src_ids for p in chunk], [p.tgt_ids for p in chunk],
                               batch_size=64, keep_states=True, logprobs=False)
        examples += head_examples(layer, chunk, forced, labels[k:k + 512])
    head = AlignmentHead(config)
    left = max(seconds - (time.monotonic() - start), 1.0)
    report = fit_head(head, examples, seconds=left, epochs=50, seed=seed, log=log)
    return head, {**report, "pairs": len(pieces), "eflomal_pairs": len(corpus),
                  "labels": LABEL_SYMMETRIZATION,
                  "total_seconds": round(time.monotonic() - start, 1)}


def write_head(folder: Path, head: AlignmentHead, *, defaults: dict[str, Any],
               trained: dict[str, Any]) -> Path:
    """Write the head's weights and description into ``folder`` (atomically)."""
    save_weights(head, folder / WEIGHTS)
    write_json(folder / INFO, {"head": head.config.to_dict(), "defaults": defaults,
                               "trained": trained})
    return folder


def read_head(folder: Path, root: str | os.PathLike | None = None
              ) -> tuple[AlignmentHead | None, dict[str, Any] | None]:
    """The head in ``folder`` (eval mode) and its ``head.json``, ``(None, None)`` when there is
    none; ``root`` as `attnkit.fileio.checked_file`. CheckpointError: broken or mismatched files."""
    if not (folder / INFO).exists():
        return None, None
    info = read_json_object(folder / INFO, "the alignment head description", root=root)
    try:
        head = AlignmentHead(AlignmentHeadConfig.from_dict(info["head"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{folder / INFO}: not an alignment head description "
                              f"({exc})") from None
    load_weights(head, folder / WEIGHTS)
    return head.eval(), info


# Fine-tuning passes over the pairs: enough for the head to follow the pairs' labels, few
# enough not to copy them link for link (measured on the WPT03 trial set; docs/results.md).
ADAPT_EPOCHS = 30


def adapt_head(head: AlignmentHead, token_pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
               pairs: Sequence[PairPieces], forced: Sequence[Forced], *,
               background: Callable[[], Sequence[tuple[str, str]]], minutes: float = 10.0,
               log: Callable[[str], None]) -> str:
    """Fine-tune ``head`` (in place: give a copy) on eflomal's links of ``token_pairs`` (the
    whitespace tokens of ``pairs``, whose forced decodings keep their states), eflomal also
    learning from the raw ``background()`` pairs; all within ``minutes``. Returns one line
    saying what was done; ``log`` announces it."""
    start = time.monotonic()
    background = list(background())
    log(f"attnkit: adapting the aligner to the {len(pairs)} pairs (no gold links; budget "
        f"{minutes:g} min): eflomal on them and {len(background):,} training pairs, then the "
        "alignment head fine-tuned on eflomal's links")
    links = eflomal_word_links(token_pairs, background=background,
                               samplers=ALIGN_SAMPLERS)[LABEL_SYMMETRIZATION]
    labelled = time.monotonic() - start
    examples = head_examples(head.config.layer, pairs, forced,
                             [piece_labels(p, link) for p, link in zip(pairs, links, strict=True)])
    left = max(minutes * 60 - (time.monotonic() - start), 1.0)
    report = fit_head(head, examples, seconds=left, epochs=ADAPT_EPOCHS)
    return (f"adapted to the {len(pairs)} pairs: eflomal on them and {len(background):,} "
            f"training pairs ({labelled:.0f} s), the head fine-tuned for {report['epochs']} "
            f"passes ({report['seconds']:.0f} s)")
