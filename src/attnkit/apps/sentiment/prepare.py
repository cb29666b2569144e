"""From a data argument to what a sentiment training needs: the reviews (training, validation
carved from it by seed, test), the text pipeline (tokenizer + vocabulary) and the model
config; and a run's files back (``vocab.json``, ``pipeline.json``, ``model.json``, the
tokenizer's): `reload` for a resume, `load` for a trained run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnkit.apps import run_files
from attnkit.apps.results import Loaded, Log, Prepared, RunSettings, stderr_log
from attnkit.apps.run_files import read_run, read_vocab
from attnkit.apps.sentiment.settings import MODEL_SIZES, PRESETS, SentimentSettings, model_config
from attnkit.data.classification_text import build_vocab, make_tokenizer
from attnkit.data.imdb import ReadStats, Review, load_split, split_validation
from attnkit.data.review_pipeline import TextPipeline
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.fileio import read_json
from attnkit.models.sentiment import SentimentClassifier, SentimentConfig
from attnkit.training.distributed import is_main_process

APP = "sentiment"
SentimentLoaded = Loaded[SentimentClassifier, TextPipeline]



@dataclass
class SplitReviews:
    """The reviews of a run: training, validation (carved from train by seed) and test."""

    train: list[Review]
    valid: list[Review]
    test: list[Review]


@dataclass
class SentimentPrepared(Prepared):
    """Everything a sentiment training needs."""

    reviews: SplitReviews | None = None
    pipeline: TextPipeline | None = None
    model: SentimentConfig | None = None


def load_reviews(path, split: str, skip_bad: bool) -> list[Review]:
    """The reviews of ``path``'s ``split`` (what was skipped reported on stderr); DataError."""
    stats = ReadStats()
    reviews = load_split(path, split, skip_bad=skip_bad, stats=stats)
    if stats.drops.total and is_main_process():
        stderr_log(stats.drops.format(f"{path} ({split})"))
    if not reviews:
        raise DataError(f"no {split} reviews found", path=str(path))
    return reviews


def read_reviews(settings: SentimentSettings, seed: int) -> SplitReviews:
    """Read and split the data of resolved ``settings``. DataError: unreadable data or no
    reviews; UsageError: the validation split is empty.
    """
    reviews = load_reviews(settings.data, "train", settings.skip_bad)
    train_reviews, valid_reviews = split_validation(reviews, settings.valid_fraction, seed)
    if not valid_reviews or not train_reviews:
        raise UsageError(f"--valid-fraction {settings.valid_fraction} of {len(reviews)} reviews "
                         "leaves an empty training or validation split; change it")
    test = (load_reviews(settings.test_data, "test", settings.skip_bad)
            if settings.test_data else [])
    return SplitReviews(train_reviews, valid_reviews, test)


def new_pipeline(settings: SentimentSettings, reviews: Sequence[Review]) -> tuple[TextPipeline,
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


def prepare(plan: RunSettings[SentimentSettings], log: Log) -> SentimentPrepared:
    """Read the reviews, train the tokenizer and build the vocabulary of a new run."""
    reviews = read_reviews(plan.settings, plan.train.seed)
    pipeline, files = new_pipeline(plan.settings, reviews.train)
    model = model_config(plan.settings)
    files = {**files, "vocab.json": pipeline.vocab, "pipeline.json": pipeline.to_dict(),
             "model.json": model.to_dict()}
    return SentimentPrepared(plan, plan.train, files, reviews=reviews, pipeline=pipeline,
                             model=model)


def reload(plan: RunSettings[SentimentSettings], out: Path, log: Log) -> SentimentPrepared:
    """The prepared data of the run in ``out`` (its pipeline files, and the reviews)."""
    model = read_model_config(out)
    pipeline = load_pipeline(out)
    reviews = read_reviews(plan.settings, plan.train.seed)
    if plan.stored is not None:
        cfg, budget = plan.train, plan.train.max_minutes
        log(f"resuming {out} with its stored settings: preset {plan.settings.preset}, seed "
            f"{cfg.seed}, {cfg.epochs} epochs, budget "
            f"{'none' if budget is None else f'{budget:g} minutes'}")
    return SentimentPrepared(plan, plan.train, reviews=reviews, pipeline=pipeline, model=model)


def load_pipeline(run) -> TextPipeline:
    """The text pipeline of a run (``pipeline.json``, ``vocab.json``, tokenizer files);
    CheckpointError: a missing or broken file, named.
    """
    run = Path(run)
    meta = read_json(run / "pipeline.json", "the run's text pipeline", root=run)
    vocab = read_vocab(run)
    try:
        return TextPipeline.from_dict(meta, vocab, run)
    except DataError as exc:
        raise CheckpointError(str(exc)) from None
    except (ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"{run / 'pipeline.json'}: bad text pipeline ({exc})") from None


def read_model_config(run) -> SentimentConfig:
    """``RUN/model.json`` as a `SentimentConfig`, its sizes checked (CheckpointError when
    broken)."""
    def build(data: dict) -> SentimentConfig:
        cfg = SentimentConfig.from_dict(data)
        cfg.check()
        return cfg
    return run_files.read_model_config(run, build, MODEL_SIZES, zero_ok=("bigram_buckets",),
                                       what="sentiment model settings")


def load(run, *, weights: str = "best", device: str | None = None,
         engine: str | None = None) -> SentimentLoaded:
    """The model of a run (eval mode, on ``device``), its text pipeline and config (``engine`` is
    unused). CheckpointError: not a sentiment run, a broken file, no such weights yet.
    """
    return read_run(SentimentLoaded, run, APP,
                    model_config=lambda path, _config: read_model_config(path),
                    pipeline=lambda path, _config, _model: load_pipeline(path),
                    build=SentimentClassifier, describe=description, model_file="model.json",
                    weights=weights, device=device)


def description(model_cfg: SentimentConfig) -> str:
    """A sentiment model in a few words (for pages and listings)."""
    block = ("one transformer block" if model_cfg.block == "transformer"
             else f"{model_cfg.num_layers} self-attention layer(s)")
    return (f"{block}, {model_cfg.num_heads} heads x {model_cfg.head_dim}, embeddings "
            f"{model_cfg.embed_dim}, {model_cfg.pooling} pooling, {model_cfg.maxlen} tokens")
