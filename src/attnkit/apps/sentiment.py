"""IMDB-style sentiment: data + tokenizer + :class:`SentimentClassifier` + the trainer + shading.

Presets (:data:`PRESETS`):

* ``keras2018`` - the 2018 Keras model and recipe: 30,000 words (Keras tokenizer), maxlen 100
  padded and truncated at the start, Adam 1e-3, batch 64, 5 epochs, no gradient clipping.
* ``best`` - the most accurate recipe measured within a 15-minute CPU budget: 100,000 words +
  2^20 hashed bigrams embedded in 64 dims, learned positions, maxlen 800 (whole reviews but
  the longest 2%; their end kept), one pre-LN transformer block (4 heads x 16), attention
  pooling, ONE epoch with linear decay from 2e-3. A second epoch memorises the training set
  (train loss 0.26 -> 0.04 at the epoch boundary) and lost test accuracy in every run tried;
  width 32 -> 64 gained 0.9 points, 128 nothing more at twice the time. With one epoch the
  validation split selects nothing, so it is 4% of train (1,000 reviews, reported), not 10%:
  the extra 1,500 training reviews gained 0.5 points on seed 1.

A run folder (see :mod:`attnkit.apps.runs`) holds ``config.json`` (the app, the format, every
:class:`Settings` field resolved, the model, and the trainer's config under ``"train"``),
``vocab.json``, ``pipeline.json`` (tokenizer, maxlen, padding), ``model.json``, the tokenizer's
files, ``metrics.jsonl``, ``best.safetensors`` and ``last/`` (the trainer's), and after
training ``test_metrics.json``.

The four entry points follow the app contract: :func:`train`, :func:`evaluate`,
:func:`predict` (a list of :class:`SentimentPrediction`) and :func:`load_run`.

Example::

    result = train("../shared/data/imdb", "runs/imdb", preset="keras2018")
    metrics = evaluate("runs/imdb")                          # the run's own test split
    pred = predict("runs/imdb", ["A wonderful, moving film."])[0]   # .prob, .tokens, .weights
    pred.render("review.png")
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnkit.apps import runs
from attnkit.apps.prediction import Prediction, write_page
from attnkit.apps.sentiment_settings import (
    APP,
    PRESETS,
    Settings,
    model_config,
    plan_fresh,
    plan_resume,
    split_overrides,
)
from attnkit.data.classification_text import build_vocab, make_tokenizer
from attnkit.data.imdb import SPLITS, ReadStats, Review, has_split, load_split, split_validation
from attnkit.data.review_pipeline import (
    CHUNK_CHARS,
    EncodedReviews,
    ReadReview,
    TextPipeline,
    collate,
)
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig, count_parameters
from attnkit.training.config import TrainConfig
from attnkit.training.distributed import is_main_process, resolve_device
from attnkit.training.trainer import TrainResult

# Test accuracy after epochs 1-5 of the 2018 Keras script on this machine (it validated on test).
KERAS2018_TEST_CURVE = (0.850, 0.857, 0.838, 0.815, 0.814)



# ---------------------------------------------------------------------------- training

@dataclass
class SplitReviews:
    """The reviews of a run: training, validation (carved from train by seed) and test."""

    train: list[Review]
    valid: list[Review]
    test: list[Review]


def read_reviews(settings: Settings, seed: int) -> SplitReviews:
    """Read and split the data of resolved ``settings``.

    Raises:
        DataError: unreadable data or no reviews.
        UsageError: the validation split is empty.
    """
    reviews = _load(settings.data, "train", settings.skip_bad)
    train_reviews, valid_reviews = split_validation(reviews, settings.valid_fraction, seed)
    if not valid_reviews or not train_reviews:
        raise UsageError(f"--valid-fraction {settings.valid_fraction} of {len(reviews)} reviews "
                         "leaves an empty training or validation split; change it")
    test = _load(settings.test_data, "test", settings.skip_bad) if settings.test_data else []
    return SplitReviews(train_reviews, valid_reviews, test)


def _load(path, split: str, skip_bad: bool) -> list[Review]:
    stats = ReadStats()
    reviews = load_split(path, split, skip_bad=skip_bad, stats=stats)
    if stats.skipped and is_main_process():
        print(stats.report(f"{path} ({split})"), file=sys.stderr)
    if not reviews:
        raise DataError(f"no {split} reviews found", path=str(path))
    return reviews


@contextmanager
def _pipeline_folder(out: Path) -> Iterator[Path]:
    """Where this process writes tokenizer files: the run (rank 0) or a scratch folder."""
    if is_main_process():
        yield out
    else:
        with tempfile.TemporaryDirectory(prefix="attnkit-rank-") as tmp:
            yield Path(tmp)


def new_pipeline(settings: Settings, reviews: Sequence[Review], folder: Path) -> TextPipeline:
    """Tokenizer (trained on ``reviews`` for subwords, into ``folder``) + vocabulary."""
    texts = [r.text for r in reviews]
    tok = make_tokenizer(settings.tokenizer, texts, folder)
    vocab = build_vocab((tok.tokenize(t) for t in texts), settings.num_words)
    return TextPipeline(tok, vocab, settings.maxlen, settings.padding,
                        PRESETS[settings.preset]["truncating"])


def train(data=None, out=None, *, resume: bool = False, overwrite: bool = False,
          **overrides) -> TrainResult:
    """Train a sentiment run into ``out`` and return the trainer's ``TrainResult``.

    Everything is validated before anything is written; then the folder is locked, the
    pipeline files written (a resume keeps the run's), the RNGs seeded, the model built and
    trained. A run stopped by a signal returns at once (the trainer said how to resume).

    Args:
        data: the training data (see :class:`Settings`); on a resume None = the run's.
        out: the run folder.
        resume: continue ``out/last`` with the run's stored settings; a given ``epochs`` /
            ``max_minutes`` applies, an option that would change the run is refused.
        overwrite: replace the run already in ``out``.
        **overrides: :class:`Settings` fields and :class:`TrainConfig` fields (epochs,
            batch_size, lr, seed, device, amp, max_minutes, progress, ...).

    Raises:
        UsageError: an unknown override, a bad value, a resume that would change the run.
        CheckpointError: ``out`` holds a run (without ``overwrite``), is being trained by
            another process, or cannot be resumed.
        DataError: unreadable data.
    """
    if out is None:
        raise UsageError("give the run folder (--out RUN)")
    out = Path(out)
    if resume and overwrite:
        raise UsageError("--resume and --overwrite contradict each other; give one")
    settings_kw, train_kw = split_overrides(overrides)
    if resume:
        settings, cfg = plan_resume(data, out, settings_kw, train_kw)
    else:
        settings, cfg = plan_fresh(data, out, overwrite, settings_kw, train_kw)
    reviews = read_reviews(settings, cfg.seed)
    # A resume reads the run's pipeline and model now, so that a broken file stops it here.
    kept = (load_pipeline(out), read_model_config(out)) if resume else None
    main = is_main_process()
    folder = runs.start_run(out, app=APP, resume=resume, overwrite=overwrite) if main \
        else nullcontext(out)
    with folder, _pipeline_folder(out) as scratch:
        pipeline, model_cfg = kept or (new_pipeline(settings, reviews.train, scratch),
                                       model_config(settings))
        if main and not resume:
            write_pipeline(out, pipeline, model_cfg)
        return _fit(out, settings, cfg, pipeline, model_cfg, reviews, resume)


def _fit(out: Path, settings: Settings, cfg: TrainConfig, pipeline: TextPipeline,
         model_cfg: SentimentConfig, reviews: SplitReviews, resume: bool) -> TrainResult:
    """Seed, build, train; then (unless stopped by a signal) the test evaluation."""
    from attnkit.training import Trainer, seed_everything

    train_set, valid_set = pipeline.dataset(reviews.train), pipeline.dataset(reviews.valid)
    test_set = pipeline.dataset(reviews.test) if reviews.test else None
    seed_everything(cfg.seed)  # before the model: the seed alone decides its initial weights
    model = SentimentClassifier(model_cfg)

    def evaluate_fn(m):
        metrics = accuracy(m, valid_set)
        if test_set is not None and settings.track_test:
            metrics.update({f"test_{k}": v for k, v in accuracy(m, test_set).items()})
        return metrics

    metadata = {"app": APP, "format": runs.FORMAT, **settings.stored(),
                "model": model_cfg.to_dict(), "parameters": count_parameters(model),
                "train_size": len(train_set), "valid_size": len(valid_set),
                "test_size": 0 if test_set is None else len(test_set)}
    trainer = Trainer(model, cfg, out, train_dataset=train_set, collate_fn=collate,
                      loss_fn=bce_loss, evaluate_fn=evaluate_fn, run_metadata=metadata)
    result = trainer.fit(resume=resume)
    if result.stop_reason == "signal":
        return result
    if test_set is not None and is_main_process():  # under torchrun, rank 0 reports alone
        best = load_run(out).model
        runs.write_json(out / "test_metrics.json", {**accuracy(best, test_set),
                                                     "examples": len(test_set),
                                                     "data": settings.test_data})
    return result


def bce_loss(model, batch):
    """Binary cross-entropy on logits (= sigmoid + BCE, as Keras, but numerically stable)."""
    from attnkit.training import LossOutput

    ids, lengths, labels = batch
    logits = model(ids, lengths)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
    return LossOutput(loss=loss, count=int(labels.shape[0]))


@torch.no_grad()
def accuracy(model, data: EncodedReviews, batch_size: int = 256) -> dict[str, float]:
    """``{"loss", "accuracy"}`` of ``model`` (in eval mode) on ``data``."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct, total_loss = 0, 0.0
    for start in range(0, len(data), batch_size):
        ids = data.ids[start:start + batch_size].to(device)
        lengths = data.lengths[start:start + batch_size].to(device)
        labels = data.labels[start:start + batch_size].to(device)
        logits = model(ids, lengths)
        total_loss += float(torch.nn.functional.binary_cross_entropy_with_logits(
            logits, labels, reduction="sum"))
        correct += int(((logits > 0).float() == labels).sum())
    model.train(was_training)
    n = max(len(data), 1)
    return {"loss": total_loss / n, "accuracy": correct / n}


def epoch_curve(run) -> list[dict]:
    """Per-epoch evaluations of a run from ``metrics.jsonl``: ``[{"epoch": 1, "valid_accuracy",
    "test_accuracy" (when tracked)}, ...]`` (epochs counted from 1)."""
    rows = []
    for line in (Path(run) / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if obj.get("kind") != "eval":
            continue
        # The trainer prefixes evaluate_fn's keys with "val_".
        row = {"epoch": int(obj["epoch"]) + 1, "valid_accuracy": obj.get("val_accuracy")}
        if "val_test_accuracy" in obj:
            row["test_accuracy"] = obj["val_test_accuracy"]
        rows.append(row)
    return rows


def format_curve(run, baseline: Sequence[float] | None = None) -> str:
    """The per-epoch curve as a table, beside the 2018 Keras test accuracies (for a keras2018
    run, unless ``baseline`` is given)."""
    if baseline is None:
        preset = runs.read_config(run, APP).get("preset")
        baseline = KERAS2018_TEST_CURVE if preset == "keras2018" else ()
    lines = ["epoch  valid acc  test acc  Keras 2018 test acc"]
    for row in epoch_curve(run):
        e = row["epoch"]
        keras = f"{baseline[e - 1]:.3f}" if e <= len(baseline) else "-"
        test = row.get("test_accuracy")
        lines.append(f"{e:>5}  {row['valid_accuracy']:>9.4f}  "
                     f"{'-' if test is None else f'{test:.4f}':>8}  {keras:>19}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- run files

def write_pipeline(out: Path, pipeline: TextPipeline, model_cfg: SentimentConfig) -> None:
    """``vocab.json``, ``pipeline.json`` and ``model.json`` of a new run."""
    pipeline.vocab.to_json(out / "vocab.json")
    runs.write_json(out / "pipeline.json", pipeline.to_dict())
    runs.write_json(out / "model.json", model_cfg.to_dict())


def load_pipeline(run) -> TextPipeline:
    """The text pipeline of a run (``pipeline.json``, ``vocab.json``, tokenizer files).

    Raises:
        CheckpointError: a missing or broken file, named.
    """
    run = Path(run)
    meta = runs.read_json(run / "pipeline.json", "the run's text pipeline")
    vocab_path = run / "vocab.json"
    runs.read_json(vocab_path, "the run's vocabulary")  # missing / not UTF-8 / not JSON
    try:
        vocab = Vocab.from_json(vocab_path)
        return TextPipeline.from_dict(meta, vocab, run)
    except DataError as exc:
        raise CheckpointError(str(exc)) from None
    except (ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"{run / 'pipeline.json'}: bad text pipeline ({exc})") from None


def read_model_config(run) -> SentimentConfig:
    """``RUN/model.json`` as a :class:`SentimentConfig` (CheckpointError when broken)."""
    path = Path(run) / "model.json"
    obj = runs.read_json(path, "the run's model settings")
    try:
        if not isinstance(obj, dict):
            raise ValueError("must be a JSON object")
        cfg = SentimentConfig.from_dict(obj)
        cfg.check()
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: bad model settings ({exc})") from None
    return cfg


def runtime_device(name: str | None) -> str:
    """``--device`` for eval and predict: None = CPU; a bad or absent device is a UsageError."""
    try:
        return str(resolve_device(name or "cpu"))
    except (ValueError, RuntimeError) as exc:
        raise UsageError(f"--device {name}: {exc}") from None


def load_run(run, *, device: str | None = "cpu") -> runs.Run:
    """The best model of a run (eval mode, on ``device``), its text pipeline and config.

    Raises:
        CheckpointError: not a sentiment run (another app's, or no run), a broken file, or
            no best weights yet.
    """
    run = Path(run)
    config = runs.read_config(run, APP)
    model_cfg = read_model_config(run)
    pipeline = load_pipeline(run)
    best = run / "best.safetensors"
    if not best.is_file():
        raise CheckpointError(f"{run}: no trained weights yet (best.safetensors is missing: the "
                              f"run stopped before its first evaluation); continue it with "
                              f"--resume {run}")
    from attnkit.training.checkpoint import load_weights

    model = SentimentClassifier(model_cfg)
    load_weights(model, best)
    device = runtime_device(device)
    return runs.Run(run, APP, model.to(device).eval(), pipeline, config, device)


def _as_run(run, device: str | None) -> runs.Run:
    return run if isinstance(run, runs.Run) else load_run(run, device=device)


# ---------------------------------------------------------------------------- evaluation

def own_test_data(config: dict[str, Any]) -> str:
    """The test data a run recorded (format 1: its data, when that has a test split)."""
    test = config.get("test_data")
    if test is None and config.get("format") == 1 and config.get("data") \
            and has_split(config["data"], "test"):
        test = config["data"]
    if test is None:
        raise UsageError("this run has no test data recorded; pass the data with --data")
    return test


def evaluate(run, data=None, *, split: str = "test", skip_bad: bool = False,
             device: str | None = "cpu", report: str | os.PathLike | None = None,
             examples: int = 20) -> dict:
    """Accuracy of a run's best model on ``data``'s ``split``.

    Args:
        run: a run folder or a loaded :class:`~attnkit.apps.runs.Run`.
        data: reviews (see :class:`Settings`); None = the run's own test data.
        split: ``"test"`` or ``"train"``.
        report: also write an HTML page with the metrics and the first ``examples`` reviews
            shaded by their weights.

    Returns:
        ``{"accuracy", "loss", "examples", "data", "split", "truncated"}``; ``truncated``
        counts the reviews longer than the model's maxlen (cut as in training).
    """
    run = _as_run(run, device)
    if split not in SPLITS:
        raise UsageError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    data = own_test_data(run.config) if data is None else data
    reviews = _load(data, split, skip_bad)
    reads = [run.pipeline.read(r.text) for r in reviews]
    ids, lengths = run.pipeline.pad(reads)
    labels = torch.tensor([r.label for r in reviews], dtype=torch.float32)
    metrics = {**accuracy(run.model, EncodedReviews(ids, lengths, labels)),
               "examples": len(reviews), "data": str(data), "split": split,
               "truncated": sum(r.dropped > 0 for r in reads)}
    if report is not None:
        shown = [(r.text, seen) for r, seen in zip(reviews[:examples], reads, strict=False)
                 if seen.tokens]
        preds = _explain(run, [t for t, _ in shown], [seen for _, seen in shown])
        write_page(preds, report, {**run.summary(), **metrics})
    return metrics


# ---------------------------------------------------------------------------- prediction

@dataclass
class SentimentPrediction(Prediction):
    """One review's sentiment and what the model read of it.

    Attributes:
        text: the review as given.
        prob: P(positive).
        label: ``"positive"`` (prob >= 0.5) or ``"negative"``.
        tokens: the tokens the model read (at most maxlen).
        weights: ``[len(tokens)]`` float32, each token's share of the decision (sums to 1;
            see :meth:`SentimentClassifier.explain`).
        contributions: ``[len(tokens)]`` float32, each token's signed part of the logit
            (> 0 towards positive; they sum to the logit minus the classifier's bias, see
            :meth:`SentimentClassifier.attribute`).
        spans: ``(start, end)`` of each token in ``text`` (as written), or None when the
            tokenizer's pieces cannot be found in the text.
        unknown: share of ``tokens`` unknown to the vocabulary (0..1).
        truncated: tokens cut off by maxlen (0 if none).
    """

    text: str
    prob: float
    label: str
    tokens: list[str]
    weights: np.ndarray
    contributions: np.ndarray
    spans: list[tuple[int, int]] | None
    unknown: float
    truncated: int

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "prob": self.prob, "label": self.label,
                "tokens": self.tokens, "weights": [float(w) for w in self.weights],
                "contributions": [float(c) for c in self.contributions],
                "spans": None if self.spans is None else [list(s) for s in self.spans],
                "unknown": self.unknown, "truncated": self.truncated}

    def figure(self):
        """One row of token cells coloured by weight, titled with the probability."""
        from attnkit.viz.heatmap import alignment_figure

        fig = alignment_figure(self.weights[None, :], self.tokens, [self.label],
                               title=f"P(positive) = {self.prob:.3f}")
        fig.axes[0].set_xlabel("token")
        fig.axes[0].set_ylabel("")
        return fig

    @classmethod
    def page(cls, predictions: Sequence[SentimentPrediction], summary: dict[str, Any]) -> str:
        """The sentiment explorer: each review as written, shaded by which way each word
        pushed the verdict (signed contributions) or by its share of the decision."""
        from attnkit.viz import Review, TokenView, sentiment_page

        reviews = [Review(p.text, p.tokens, p.prob, spans=p.spans, views=[
            TokenView("push towards positive / negative", p.contributions, signed=True),
            TokenView("share of the decision (pooling weight)", p.weights)])
            for p in predictions]
        return sentiment_page(reviews, summary)


def read_texts(pipeline: TextPipeline, texts: Sequence[str]) -> list[ReadReview]:
    """Read every review; an empty one, or one without a token, is a UsageError naming it."""
    if isinstance(texts, str):
        raise UsageError("predict takes a list of reviews, not one string")
    reads = []
    for i, text in enumerate(texts, 1):
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"review {i} is empty: nothing to predict")
        seen = pipeline.read(text)
        if not seen.tokens:
            kind = getattr(pipeline.tokenizer, "kind", "run's")
            raise UsageError(f"review {i} ({text[:40]!r}) has no token the {kind} tokenizer "
                             "reads: nothing to predict")
        reads.append(seen)
    return reads


def predict(run, texts: Sequence[str], *, device: str | None = "cpu",
            batch_size: int = 64) -> list[SentimentPrediction]:
    """P(positive) and per-token weights of each review (see :class:`SentimentPrediction`).

    Args:
        run: a run folder or a loaded :class:`~attnkit.apps.runs.Run`.
        texts: reviews; each must have at least one token.
        batch_size: reviews per forward pass.

    Raises:
        UsageError: an empty review, or one without a token.
    """
    run = _as_run(run, device)
    reads = read_texts(run.pipeline, texts)
    texts = list(texts)
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    out: list[SentimentPrediction] = []
    for start in range(0, len(reads), batch_size):
        end = start + batch_size
        out += _explain(run, list(texts[start:end]), reads[start:end])
    return out


def _explain(run: runs.Run, texts: Sequence[str],
             reads: Sequence[ReadReview]) -> list[SentimentPrediction]:
    """Predictions for reviews already read (each with at least one token)."""
    if not reads:
        return []
    pipeline = run.pipeline
    ids, lengths = pipeline.pad(reads)
    probs, scores, signed = run.model.attribute(ids.to(run.device), lengths.to(run.device))
    out = []
    for b, (text, seen) in enumerate(zip(texts, reads, strict=True)):
        n = len(seen.tokens)
        real = slice(pipeline.maxlen - n, None) if pipeline.padding == "pre" else slice(0, n)
        prob = float(probs[b])
        out.append(SentimentPrediction(
            text, prob, "positive" if prob >= 0.5 else "negative", seen.tokens,
            scores[b, real].float().cpu().numpy(), signed[b, real].float().cpu().numpy(),
            _spans(pipeline, text, seen), seen.unknown_share, seen.dropped))
    return out


def _spans(pipeline: TextPipeline, text: str,
           seen: ReadReview) -> list[tuple[int, int] | None] | None:
    """Where each kept token sits in the review as written (None for a review too long to
    search); pre-truncation kept the last tokens, so they are matched from the end."""
    from attnkit.viz import token_spans

    if len(text) > CHUNK_CHARS:
        return None
    return token_spans(text, seen.tokens,
                       from_end=seen.dropped > 0 and pipeline.truncating == "pre")
