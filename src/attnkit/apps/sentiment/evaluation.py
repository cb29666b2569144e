"""Scoring a sentiment run: accuracy and loss on labelled reviews, and the report page."""

from __future__ import annotations

import torch

from attnkit.apps.results import Evaluation
from attnkit.apps.sentiment.prediction import SentimentPrediction, predictions
from attnkit.apps.sentiment.prepare import SentimentLoaded, load_reviews
from attnkit.apps.sentiment.training import accuracy
from attnkit.data.imdb import SPLITS
from attnkit.data.review_pipeline import EncodedReviews
from attnkit.errors import UsageError

DEFAULT_EXAMPLES = 20


def evaluation(loaded: SentimentLoaded, data: str | None, *, report: int = 0, split: str = "test",
               skip_bad: bool = False) -> Evaluation:
    """Accuracy of a run's model on ``data``'s ``split`` (None: the run's own test data), with
    ``report`` reviews on the page (0: none; -1: 20). Returns an `Evaluation` with
    ``{"accuracy", "loss", "examples", "data", "split", "truncated"}`` (reviews cut at maxlen).
    UsageError: an unknown split, or no data for a run that recorded none.
    """
    if split not in SPLITS:
        raise UsageError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    if data is None:
        data = loaded.config.get("test_data")   # the run's own
        if data is None:
            raise UsageError("this run has no test data recorded; pass the data with --data")
    reviews = load_reviews(data, split, skip_bad)
    reads = [loaded.pipeline.read(r.text) for r in reviews]
    ids, lengths = loaded.pipeline.pad(reads)
    labels = torch.tensor([r.label for r in reviews], dtype=torch.float32)
    metrics = {**accuracy(loaded.model, EncodedReviews(ids, lengths, labels)),
               "examples": len(reviews), "data": str(data), "split": split,
               "truncated": sum(r.dropped > 0 for r in reads)}
    n = DEFAULT_EXAMPLES if report < 0 else report
    shown = [p for p in predictions(loaded, [r.text for r in reviews[:n]]) if not p.empty
             ] if report else []
    return Evaluation(metrics, SentimentPrediction.page(shown, {
        **loaded.summary(), "accuracy": f"{metrics['accuracy']:.4f}",
        "loss": f"{metrics['loss']:.4f}", "reviews": f"{len(reviews):,}",
        "data": str(data)}) if shown else None)
