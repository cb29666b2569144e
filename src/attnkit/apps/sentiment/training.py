"""The sentiment app's training wiring: the loss, the validation accuracy that selects
checkpoints (and the per-epoch test curve of the 2018 script), the trainer, and the curve
printed after training beside the Keras figures (`format_curve`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import torch

from attnkit.apps.results import FINAL_EVALUATION, Log
from attnkit.apps.run_files import FORMAT, read_config
from attnkit.apps.sentiment.prepare import APP, SentimentPrepared
from attnkit.data.review_pipeline import EncodedReviews, collate
from attnkit.decoding.hypothesis import inference
from attnkit.explain.trust import docs_figures
from attnkit.models.sentiment import SentimentClassifier, count_parameters
from attnkit.training import LossOutput, Trainer, TrainResult
from attnkit.training.run_folder import read_evaluations


def bce_loss(model, batch) -> LossOutput:
    """Binary cross-entropy on logits (= sigmoid + BCE, as Keras, but numerically stable)."""
    ids, lengths, labels = batch
    logits = model(ids, lengths)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
    return LossOutput(loss=loss, count=int(labels.shape[0]))


def accuracy(model, data: EncodedReviews, batch_size: int = 256) -> dict[str, float]:
    """``{"loss", "accuracy"}`` of ``model`` (in eval mode) on ``data``: reviews in
    length-ordered batches cut to their longest (`SentimentClassifier.logits_by_length`)."""
    device = next(model.parameters()).device
    with inference(model):
        logits = model.logits_by_length(data.ids.to(device), data.lengths.to(device),
                                        batch_size=batch_size)
    labels = data.labels.to(device)
    loss = float(torch.nn.functional.binary_cross_entropy_with_logits(
        logits.float(), labels, reduction="sum"))
    n = max(len(data), 1)
    return {"loss": loss / n, "accuracy": int(((logits > 0).float() == labels).sum()) / n}


def make_trainer(prep: SentimentPrepared, out: Path, *, log: Log, evaluate: bool = True) -> Trainer:
    """The run's model (seeded by the caller) and its `attnkit.training.Trainer` (without a
    validation when not ``evaluate``: `benchmarks/train_speed.py` times its steps)."""
    settings, pipeline, reviews = prep.config.settings, prep.pipeline, prep.reviews
    train_set, valid_set = pipeline.dataset(reviews.train), pipeline.dataset(reviews.valid)
    test_set = pipeline.dataset(reviews.test) if reviews.test else None
    model = SentimentClassifier(prep.model)

    def evaluate_fn(m):
        metrics = accuracy(m, valid_set)
        if test_set is not None and settings.track_test:
            metrics.update({f"test_{k}": v for k, v in accuracy(m, test_set).items()})
        return metrics

    metadata = {"app": APP, "format": FORMAT, **dataclasses.asdict(settings),
                "model": prep.model.to_dict(), "parameters": count_parameters(model),
                "train_size": len(train_set), "valid_size": len(valid_set),
                "test_size": 0 if test_set is None else len(test_set)}
    # Without a validation there is nothing to stop early on.
    cfg = prep.train if evaluate else dataclasses.replace(prep.train, early_stopping_patience=None)
    return Trainer(model, cfg, out, train_dataset=train_set, collate_fn=collate,
                   loss_fn=bce_loss, evaluate_fn=evaluate_fn if evaluate else None,
                   run_metadata=metadata, next_stage=None if test_set is None else FINAL_EVALUATION,
                   # Its fused attention-pooling kernel cuts a compiled graph: compile=auto
                   # leaves it eager (docs/results.md, "Compiled training").
                   compile_pays=False)


def fit(prep: SentimentPrepared, out: Path, *, resume: bool, log: Log) -> TrainResult:
    """Build the model (seeded by the caller) and train it, or continue ``last/``."""
    return make_trainer(prep, out, log=log).fit(resume=resume)


def format_curve(run, baseline: Sequence[float] | None = None, best_step: int | None = None) -> str:
    """The per-epoch curve (``metrics.jsonl``) as a table, beside the 2018 Keras test accuracies
    (for a keras2018 run, unless ``baseline`` is given); the evaluation at ``best_step`` is
    marked as the one whose weights the run keeps (its test accuracy is the run's)."""
    if baseline is None:
        preset = read_config(run, APP).get("preset")
        # The 2018 Keras script's test accuracy after each epoch (docs/results.md).
        baseline = docs_figures("keras2018 test curve") if preset == "keras2018" else ()
    lines = ["epoch  valid acc  test acc  Keras 2018 test acc"]
    for row in read_evaluations(run):   # the trainer prefixes evaluate_fn's keys with "val_"
        e, test = int(row["epoch"]) + 1, row.get("val_test_accuracy")
        keras = f"{baseline[e - 1]:.3f}" if e <= len(baseline) else "-"
        kept = ("  <- kept (best validation)" if best_step is not None
                and row.get("step") == best_step else "")
        lines.append(f"{e:>5}  {row.get('val_accuracy'):>9.4f}  "
                     f"{'-' if test is None else f'{test:.4f}':>8}  {keras:>19}{kept}")
    return "\n".join(lines)
