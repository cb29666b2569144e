"""From a data argument to what a sentiment training needs: the reviews (training, validation
carved from it by seed, test), the text pipeline (tokenizer + vocabulary) and the model config.

A run folder holds ``config.json``, ``vocab.json``, ``pipeline.json`` (tokenizer, maxlen,
padding), ``model.json`` and the tokenizer's files; `save` writes them once rank 0 has
prepared, `reload` reads them back (a resume; the other ranks under ``torchrun``).

Example:
    ```python
    plan = configure({"data": "imdb.jsonl.gz"}, Path("runs/imdb"), None)
    prepared = prepare(plan, print)
    len(prepared.reviews.train), prepared.pipeline.maxlen, prepared.model.embed_dim
    ```
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.apps import run_files
from attnkit.apps.base import Loaded, Log, Prepared
from attnkit.apps.options import build_bounded, checked_sizes, resolve_device
from attnkit.apps.runs import read_config, write_json
from attnkit.apps.sentiment.settings import PRESETS, SentimentPlan, Settings, model_config
from attnkit.data.classification_text import build_vocab, make_tokenizer
from attnkit.data.imdb import ReadStats, Review, load_split, split_validation
from attnkit.data.review_pipeline import TextPipeline
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.fileio import atomic_write_bytes
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig
from attnkit.training import load_weights
from attnkit.training.distributed import is_main_process

APP = "sentiment"

MODEL_SIZES = ("vocab_size", "maxlen", "embed_dim", "num_heads", "head_dim", "num_layers",
               "ffn_dim", "bigram_buckets")


@dataclass
class SplitReviews:
    """The reviews of a run: training, validation (carved from train by seed) and test."""

    train: list[Review]
    valid: list[Review]
    test: list[Review]


@dataclass
class SentimentPrepared(Prepared):
    """Everything a sentiment training needs (see the module docstring)."""

    reviews: SplitReviews | None = None
    pipeline: TextPipeline | None = None
    model: SentimentConfig | None = None
    files: dict[str, bytes] = field(default_factory=dict)


def load_reviews(path, split: str, skip_bad: bool) -> list[Review]:
    """The reviews of ``path``'s ``split``; what was skipped is reported on stderr.

    Raises:
        DataError: unreadable data, or no reviews.
    """
    stats = ReadStats()
    reviews = load_split(path, split, skip_bad=skip_bad, stats=stats)
    if stats.skipped and is_main_process():
        print(stats.report(f"{path} ({split})"), file=sys.stderr)
    if not reviews:
        raise DataError(f"no {split} reviews found", path=str(path))
    return reviews


def read_reviews(settings: Settings, seed: int) -> SplitReviews:
    """Read and split the data of resolved ``settings``.

    Raises:
        DataError: unreadable data or no reviews.
        UsageError: the validation split is empty.
    """
    reviews = load_reviews(settings.data, "train", settings.skip_bad)
    train_reviews, valid_reviews = split_validation(reviews, settings.valid_fraction, seed)
    if not valid_reviews or not train_reviews:
        raise UsageError(f"--valid-fraction {settings.valid_fraction} of {len(reviews)} reviews "
                         "leaves an empty training or validation split; change it")
    test = (load_reviews(settings.test_data, "test", settings.skip_bad)
            if settings.test_data else [])
    return SplitReviews(train_reviews, valid_reviews, test)


def new_pipeline(settings: Settings, reviews: Sequence[Review]) -> tuple[TextPipeline,
                                                                          dict[str, bytes]]:
    """Tokenizer (trained on ``reviews`` for subwords) + vocabulary, and the tokenizer's files
    to save in the run."""
    texts = [r.text for r in reviews]
    with tempfile.TemporaryDirectory(prefix="attnkit-tokenizer-") as tmp:
        tok = make_tokenizer(settings.tokenizer, texts, Path(tmp))
        files = {p.name: p.read_bytes() for p in Path(tmp).iterdir() if p.is_file()}
    vocab = build_vocab((tok.tokenize(t) for t in texts), settings.num_words)
    return TextPipeline(tok, vocab, settings.maxlen, settings.padding,
                        PRESETS[settings.preset]["truncating"]), files


def prepare(plan: SentimentPlan, log: Log) -> SentimentPrepared:
    """Read the reviews, train the tokenizer and build the vocabulary of a new run."""
    reviews = read_reviews(plan.settings, plan.train.seed)
    pipeline, files = new_pipeline(plan.settings, reviews.train)
    return SentimentPrepared(plan, plan.train, reviews=reviews, pipeline=pipeline,
                             model=model_config(plan.settings), files=files)


def save(prepared: SentimentPrepared, out: Path) -> None:
    """``vocab.json``, ``pipeline.json``, ``model.json`` and the tokenizer's files."""
    for name, data in prepared.files.items():
        atomic_write_bytes(out / name, data)
    prepared.pipeline.vocab.to_json(out / "vocab.json")
    write_json(out / "pipeline.json", prepared.pipeline.to_dict())
    write_json(out / "model.json", prepared.model.to_dict())


def reload(plan: SentimentPlan, out: Path, log: Log) -> SentimentPrepared:
    """The prepared data of the run in ``out`` (its pipeline files, and the reviews)."""
    model = read_model_config(out)
    pipeline = load_pipeline(out)
    reviews = read_reviews(plan.settings, plan.train.seed)
    return SentimentPrepared(plan, plan.train, reviews=reviews, pipeline=pipeline, model=model)


def load_pipeline(run) -> TextPipeline:
    """The text pipeline of a run (``pipeline.json``, ``vocab.json``, tokenizer files).

    Raises:
        CheckpointError: a missing or broken file, named.
    """
    run = Path(run)
    meta = run_files.read_json(run / "pipeline.json", "the run's text pipeline", root=run)
    limit = run_files.MAX_VOCAB_BYTES
    vocab_path = run_files.run_file(run, "vocab.json", "the run's vocabulary", limit=limit)
    run_files.read_json(vocab_path, "the run's vocabulary", root=run, limit=limit)
    try:
        vocab = Vocab.from_json(vocab_path)
        return TextPipeline.from_dict(meta, vocab, run)
    except DataError as exc:
        raise CheckpointError(str(exc)) from None
    except (ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"{run / 'pipeline.json'}: bad text pipeline ({exc})") from None


def read_model_config(run) -> SentimentConfig:
    """``RUN/model.json`` as a `SentimentConfig`, its sizes checked (CheckpointError when
    broken)."""
    path = Path(run) / "model.json"
    obj = run_files.read_json_object(path, "the run's model settings", root=run)
    checked_sizes({k: obj.get(k) for k in MODEL_SIZES}, str(path), zero_ok=("bigram_buckets",))
    try:
        cfg = SentimentConfig.from_dict(obj)
        cfg.check()
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: bad model settings ({exc})") from None
    return cfg


def load(run, *, weights: str = "best", device: str | None = None,
         engine: str | None = None) -> Loaded:
    """The model of a run (eval mode, on ``device``), its text pipeline and config (the
    sentiment app's `attnkit.apps.App.load`; ``engine`` is not used: there is one).

    Raises:
        CheckpointError: not a sentiment run (another app's, or no run), a broken file, or
            no such weights yet.
    """
    run = Path(run)
    config = read_config(run, APP)
    model_cfg = read_model_config(run)
    pipeline = load_pipeline(run)
    path = run_files.weights_file(run, weights)
    model = build_bounded(lambda: SentimentClassifier(model_cfg), f"{run / 'model.json'}")
    load_weights(model, path)
    device = resolve_device(device)
    block = ("one transformer block" if model_cfg.block == "transformer"
             else f"{model_cfg.num_layers} self-attention layer(s)")
    return Loaded(run, APP, model.to(device).eval(), pipeline, config, device,
                  description=f"{block}, {model_cfg.num_heads} heads x {model_cfg.head_dim}, "
                              f"embeddings {model_cfg.embed_dim}, {model_cfg.pooling} pooling, "
                              f"{model_cfg.maxlen} tokens")
