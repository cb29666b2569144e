"""From a data argument to what a caption training needs: the image splits, the vocabulary of
the training captions and the captioner's config; and a run's files back (``vocab.json``,
``model.json``): `reload` for a resume, `load` for a trained run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attnkit.apps.caption.settings import CaptionSettings, model_config, read_model_config
from attnkit.apps.results import Loaded, Log, Prepared, RunSettings, stderr_log
from attnkit.apps.run_files import read_run, read_vocab
from attnkit.data.caption_data import CaptionData, load_splits
from attnkit.data.vocab import Vocab
from attnkit.errors import DataError
from attnkit.models.captioner import Captioner, CaptionerConfig

APP = "caption"
CaptionLoaded = Loaded[Captioner, Vocab]   # the pipeline of a caption run is its vocabulary


@dataclass
class CaptionPrepared(Prepared):
    """Everything a caption training needs."""

    model: CaptionerConfig | None = None
    vocab: Vocab | None = None
    splits: dict[str, CaptionData] = field(default_factory=dict)


def splits_of(settings: CaptionSettings, seed: int) -> dict[str, CaptionData]:
    """The training and validation splits of ``settings`` (synthetic scenes of ``seed``, or a
    real data set split by it)."""
    return load_splits(settings.data, seed, num_train=settings.num_train,
                       num_valid=settings.num_valid, num_test=settings.num_test,
                       image_size=settings.image_size, valid_fraction=settings.valid_fraction,
                       names=("train", "valid"), log=stderr_log)


def prepare(plan: RunSettings[CaptionSettings], log: Log) -> CaptionPrepared:
    """Read (or draw) the images, build the vocabulary and model config of a new run; DataError."""
    settings = plan.settings
    splits = splits_of(settings, plan.train.seed)
    vocab = Vocab.build(r[0] for r in splits["train"].refs)
    if len(vocab) == len(vocab.specials):
        raise DataError(f"{settings.data}: the training captions have no words")
    max_len = max(len(r[0]) for r in splits["train"].refs)
    model = model_config(plan.model_options, settings.image_size, vocab, max_len)
    return CaptionPrepared(plan, plan.train, {"vocab.json": vocab, "model.json": model.to_dict()},
                           splits=splits, vocab=vocab, model=model)


def reload(plan: RunSettings[CaptionSettings], out: Path, log: Log) -> CaptionPrepared:
    """The prepared data of the run in ``out`` (its files, and the images)."""
    return CaptionPrepared(plan, plan.train, model=read_model_config(out),
                           vocab=read_vocab(out), splits=splits_of(plan.settings,
                                                                   plan.train.seed))


def load(run, *, weights: str = "best", device: str | None = None,
         engine: str | None = None) -> CaptionLoaded:
    """A trained caption run: the model (eval mode, on ``device``), its vocabulary as the
    pipeline, its ``config.json``. CheckpointError: not a caption run, bad files, no weights.
    """
    return read_run(CaptionLoaded, run, APP,
                    model_config=lambda path, _config: read_model_config(path),
                    pipeline=lambda path, _config, _model: read_vocab(path), build=Captioner,
                    describe=description, model_file="model.json", weights=weights,
                    device=device)


def description(model_cfg: CaptionerConfig) -> str:
    """A captioner in a few words (for pages and listings)."""
    side = model_cfg.feature_size
    return (f"{model_cfg.attention} attention over a {side}x{side} feature map, LSTM "
            f"{model_cfg.hidden}, {model_cfg.image_size} px")
