"""The caption of one image and where each word looked: what the caption app's ``predict``
returns; and how far its page may trust a word's map (`caption_trust`: the pointing game of
this run's ``caption eval --pointing``, else of docs/results.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnkit.apps.caption.metrics import decode_captions
from attnkit.apps.caption.prepare import CaptionLoaded
from attnkit.apps.prediction import Prediction, rounded
from attnkit.apps.results import TEST_METRICS
from attnkit.data.caption_data import to_chw
from attnkit.data.caption_files import MAX_PIXELS, read_image
from attnkit.errors import UsageError
from attnkit.explain.captions import METHODS, word_maps
from attnkit.explain.captum import explain_methods
from attnkit.explain.trust import RANDOM, Measured, docs_measured, run_trust, shown_order

POINTING = "pointing accuracy ↑"
# Trust needs a lead of MARGIN in pointing accuracy over random and every other method, on
# MIN_WORDS words or more (docs/guide/trust.md).
MARGIN, MIN_WORDS = 0.02, 100
MEASURED = docs_measured("caption", POINTING, margin=MARGIN, min_count=MIN_WORDS)


def pointing_measured(table: Mapping | None) -> Measured | None:
    """A `attnkit.explain.captions.pointing_game` table as a `Measured` (random as the floor);
    None when it holds no method.
    """
    scores = {m: float(row["accuracy"]) for m, row in (table or {}).items() if m != RANDOM}
    if not scores:
        return None
    words = int(next(iter(table.values()))["words"])
    floor = table.get(RANDOM)
    return Measured(scores, POINTING, f"this run's caption eval --pointing, {words} words",
                    random=None if floor is None else float(floor["accuracy"]), count=words,
                    margin=MARGIN, min_count=MIN_WORDS, unit="words")


def caption_trust(run: str | os.PathLike, carried: Sequence[str]) -> str:
    """The method of ``carried`` to show first, by the run's pointing game else `MEASURED`; an
    unreadable file counts as none (one warning names it).
    """
    return run_trust(run, carried, TEST_METRICS, "the run's test metrics",
                     lambda metrics: pointing_measured(metrics.get("pointing")), MEASURED)


@dataclass
class CaptionPrediction(Prediction):
    """The caption of one image and where each word looked.

    Attributes:
        source: the image file (``"<array>"`` for an array).
        words: the caption, one word per map (``<unk>`` included).
        weights: float32 ``[len(words), side, side]``, each word's attention map
            (``side = image_size / 8``).
        image: uint8 ``[D, D, 3]``, the image as shown under the maps.
        unknown: share of the caption's words that are ``<unk>``.
        truncated: 1 when the image was resized to the model's input, else 0.
        original_size, input_size: ``(width, height)`` of the input; the side the model saw.
        explanations: other maps by method (``"grad-input"``, ``"integrated-gradients"``;
            `attnkit.explain.captions`), each shaped like ``weights``, when asked.
        shown: the method a figure draws and the page opens on (the first of ``explain``).
        order: the methods the page offers, ``shown`` first.
        why: how far the pointing game lets one trust attention (`caption_trust`),
            or None.
    """

    source: str
    words: list[str]
    weights: np.ndarray
    image: np.ndarray
    unknown: float = 0.0
    truncated: int = 0
    original_size: tuple[int, int] = (0, 0)
    input_size: int = 0
    explanations: dict[str, np.ndarray] | None = None
    shown: str = "attention"
    order: tuple[str, ...] = ("attention",)
    why: str | None = None

    @property
    def caption(self) -> str:
        return " ".join(self.words)

    def to_dict(self) -> dict[str, Any]:
        row = {"image": self.source, "caption": self.caption, "words": self.words,
               "weights": rounded(self.weights, 5), "unknown": self.unknown,
               "truncated": self.truncated, "original_size": list(self.original_size)}
        if self.explanations:
            row["explanations"] = {k: rounded(v, 5) for k, v in self.explanations.items()}
        return row

    def text_line(self, **show: Any) -> str:
        return self.caption

    def note(self) -> str | None:
        """One line for stderr when the model could not see or name everything, else None."""
        parts = []
        if self.truncated:
            (w, h), side = self.original_size, self.input_size
            parts.append(f"resized from {w}x{h} to the model's {side}x{side} pixels")
        if self.unknown:
            parts.append(f"{self.unknown:.0%} of the caption's words are unknown (<unk>)")
        return f"{self.source}: {'; '.join(parts)}" if parts else None

    def figure(self):
        """The overlay grid: the image, then one panel per word with its map."""
        from attnkit.viz import attention_grid

        return attention_grid(self.image, self.explanations[self.shown] if self.shown != "attention"
                              and self.explanations else self.weights, self.words)

    @classmethod
    def page(cls, predictions: Sequence[CaptionPrediction], summary: dict[str, Any], *,
             references: Sequence[Sequence[str]] | None = None) -> str:
        """The caption explorer: each image with the selected word's attention over it, and its
        reference captions when given."""
        from attnkit.viz import CaptionExample, caption_page

        refs = references or [()] * len(predictions)
        return caption_page([CaptionExample(p.image, p.words, p.weights, r,
                                            dict(p.explanations or {}))
                             for p, r in zip(predictions, refs, strict=True)], summary,
                            order=predictions[0].order, note=predictions[0].why)


def predictions(loaded: CaptionLoaded, images, *, beam_size: int = 1, display_size: int = 256,
                max_pixels: int | None = MAX_PIXELS,
                attention: bool | str | None = None,
                explain: str | Sequence[str] | None = None) -> list[CaptionPrediction]:
    """Caption ``images`` (paths or uint8 ``[H, W, 3]`` arrays, any format
    `attnkit.data.caption_files.load_image` reads, at most ``max_pixels``) and keep where each
    word looked, shown at ``display_size``. ``attention`` is accepted for the contract (maps
    always come); ``explain`` adds other maps. DataError: a missing or unreadable file (named);
    UsageError: an array that is not uint8 ``[H, W, 3]``.
    """
    if beam_size < 1 or display_size < 1:
        raise UsageError(f"beam_size and display_size must be >= 1, got {beam_size}, "
                         f"{display_size}")
    methods = explain_methods(explain, METHODS)
    size = loaded.model.config.image_size
    read = [read_image(item, size, display_size, max_pixels) for item in images]
    chw = to_chw([r[0] for r in read])
    preds = _predictions(loaded, chw, [r[1] for r in read], beam_size=beam_size)
    for pred, (_, _, source, original) in zip(preds, read, strict=True):
        pred.source, pred.original_size = source, original
        pred.truncated = int(original != (size, size))
    vocab, device = loaded.pipeline, loaded.device
    for k, pred in enumerate(preds):   # other maps: teacher forcing of the caption
        if methods and pred.words:
            ids = vocab.encode(pred.words)
            tgt_in = torch.tensor([[vocab.bos_id, *ids[:-1]]], device=device)
            tgt_out, image = torch.tensor([ids], device=device), chw[k:k + 1].to(device)
            pred.explanations = {m: word_maps(loaded.model, image, tgt_in, tgt_out, m)[0]
                                 .cpu().numpy() for m in methods if m != "attention"}
    order = shown_order(methods)
    why = None if methods else caption_trust(loaded.path, ["attention"])
    for pred in preds:
        pred.order, pred.why, pred.shown = order, why, order[0]
    return preds


def _predictions(run: CaptionLoaded, images: Tensor, shown: list[np.ndarray], *,
                 beam_size: int) -> list[CaptionPrediction]:
    vocab = run.pipeline   # one word per map, even <unk>
    return [CaptionPrediction("<array>", vocab.decode(ids, strip_specials=False), maps, picture,
                              sum(i == vocab.unk_id for i in ids) / max(len(ids), 1),
                              input_size=run.model.config.image_size)
            for (ids, maps), picture in zip(decode_captions(run.model, images,
                                                            beam_size=beam_size),
                                            shown, strict=True)]
