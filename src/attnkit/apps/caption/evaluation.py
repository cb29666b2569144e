"""Scoring a caption run: exact match, BLEU-4, and (synthetic scenes) where the attention of
colour and count words lands, beside uniform attention; and the report page.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from attnkit.apps.caption.metrics import caption_metrics
from attnkit.apps.caption.prediction import CaptionPrediction, _predictions
from attnkit.apps.caption.prepare import CaptionLoaded
from attnkit.apps.caption.settings import CaptionSettings
from attnkit.apps.results import Evaluation, stderr_log
from attnkit.data.caption_data import CaptionData, real_splits, synthetic_split
from attnkit.errors import UsageError
from attnkit.explain.captions import grounding, grounding_table, pointing_game

DEFAULT_EXAMPLES = 8


def test_split(settings: CaptionSettings, seed: int, data: str | None) -> CaptionData:
    """The images an evaluation scores: the run's own test split (synthetic scenes of its
    seed), synthetic scenes, or every image of another real data set."""
    size = settings.image_size
    if data == "synthetic" or (data is None and settings.data == "synthetic"):
        return synthetic_split(settings.num_test, 3 * seed + 2, size)
    if data is None or data == settings.data:
        return real_splits(settings.data, size, settings.valid_fraction, seed, ("test",),
                           stderr_log)["test"]
    return real_splits(data, size, settings.valid_fraction, seed, ("all",), stderr_log)["all"]


def evaluation(loaded: CaptionLoaded, data: str | None, *, report: int = 0, beam_size: int = 1,
               num_test: int | None = None, pointing: bool = False) -> Evaluation:
    """Metrics of a run's model on ``data`` (`test_split`): ``{"accuracy", "bleu4", "examples",
    "beam_size", "attention_supervision"}``, on synthetic scenes also the grounding figures
    (`attnkit.explain.captions.grounding`) and with ``pointing`` the pointing game
    (`attnkit.explain.captions.pointing_game`); ``report`` test images on the page (-1: the
    default, 8). ``num_test``: synthetic test scenes (default: the run's).
    """
    if beam_size < 1:
        raise UsageError(f"beam size must be >= 1, got {beam_size}")
    settings = CaptionSettings.from_config(loaded.config)
    if num_test is not None:
        settings = dataclasses.replace(settings, num_test=num_test)
    test = test_split(settings, int(loaded.config.get("train", {}).get("seed", 0)), data)
    model, vocab = loaded.model, loaded.pipeline
    # A run trained with supervised attention fitted the very boxes grounding scores: say so.
    metrics = {**caption_metrics(model, test, vocab, beam_size=beam_size),
               **grounding(model, test, vocab), "beam_size": beam_size,
               "attention_supervision": settings.attention_supervision}
    if pointing:
        from attnkit.explain.captum import have_captum

        metrics["pointing"] = pointing_game(model, test, vocab, methods=(
            "attention", *(("grad-input", "integrated-gradients") if have_captum() else ())))
    return Evaluation(metrics, _report(loaded, test, metrics, DEFAULT_EXAMPLES if report < 0
                                       else report) if report else None)


def _report(run: CaptionLoaded, test: CaptionData, metrics: dict[str, Any], examples: int) -> str:
    """The caption explorer for the first ``examples`` test images, under the metrics."""
    from attnkit.apps.caption.prediction import MEASURED, pointing_measured
    from attnkit.explain.trust import best_shown

    images = test.images[:examples]
    preds = _predictions(run, images, [img.permute(1, 2, 0).numpy() for img in images],
                         beam_size=metrics["beam_size"])
    summary = {**run.summary(), "exact-match accuracy": f"{metrics['accuracy']:.4f}",
               "BLEU-4": f"{metrics['bleu4']:.4f}", "test images": f"{metrics['examples']:,}",
               "beam": metrics["beam_size"]}
    if "grounding_mass" in metrics:
        summary["grounding"] = grounding_table(metrics)
    # The page carries attention only; the sentence says how it fared in this pointing game.
    preds[0].why = best_shown(["attention"], pointing_measured(metrics.get("pointing")) or
                              MEASURED, add="caption predict --explain")
    return CaptionPrediction.page(preds, summary, references=[
        [" ".join(r) for r in refs] for refs in test.refs[:len(preds)]])
