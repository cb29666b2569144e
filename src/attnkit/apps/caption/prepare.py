"""From a data argument to what a caption training needs: the settings of a new run or a
resume (`configure`, nothing written), the image splits, the vocabulary of the training
captions and the captioner's config.

A run folder holds ``config.json``, ``vocab.json`` and ``model.json`` (the
`attnkit.models.captioner.CaptionerConfig`, with its ``version``); `save` writes them once rank
0 has prepared, `reload` reads them back (a resume; the other ranks under ``torchrun``).

Example:
    ```python
    plan = configure({"num_train": 64}, Path("runs/tiny"), None)
    prepared = prepare(plan, print)
    len(prepared.vocab), prepared.model.max_caption_len
    ```
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnkit.apps.base import Loaded, Log, Prepared
from attnkit.apps.caption.settings import (
    RESUME_APPLIED,
    CaptionPlan,
    CaptionSettings,
    model_config,
    split_overrides,
    train_config,
)
from attnkit.apps.options import build_bounded, checked_sizes, resolve_device
from attnkit.apps.run_files import MAX_VOCAB_BYTES, read_json_object, run_file, weights_file
from attnkit.apps.runs import check_resume, read_config, write_json
from attnkit.data.caption_data import CaptionData, load_splits
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError
from attnkit.models.captioner import Captioner, CaptionerConfig
from attnkit.training import TrainConfig, load_weights

APP = "caption"
MODEL_SIZES = ("vocab_size", "image_size", "feature_size", "channels", "emb_dim", "hidden",
               "attention_units", "max_caption_len", "glimpses")


@dataclass
class CaptionPrepared(Prepared):
    """Everything a caption training needs (see the module docstring)."""

    model: CaptionerConfig | None = None
    vocab: Vocab | None = None
    splits: dict[str, CaptionData] = field(default_factory=dict)


def note(message: str) -> None:
    """What the readers skipped, for the user (stderr: stdout stays for results)."""
    print(message, file=sys.stderr)


def splits_of(settings: CaptionSettings, seed: int) -> dict[str, CaptionData]:
    """The training and validation splits of ``settings`` (synthetic scenes of ``seed``, or a
    real data set split by it)."""
    return load_splits(settings.data, seed, num_train=settings.num_train,
                       num_valid=settings.num_valid, num_test=settings.num_test,
                       image_size=settings.image_size, valid_fraction=settings.valid_fraction,
                       names=("train", "valid"), log=note)


def prepare(plan: CaptionPlan, log: Log) -> CaptionPrepared:
    """Read (or draw) the images and build the vocabulary and the model config of a new run.

    Raises:
        DataError: unreadable data, or training captions without a word.
    """
    settings = plan.settings
    splits = splits_of(settings, plan.train.seed)
    vocab = Vocab.build(r[0] for r in splits["train"].refs)
    if len(vocab) == len(vocab.specials):
        raise DataError(f"{settings.data}: the training captions have no words")
    max_len = max(len(r[0]) for r in splits["train"].refs)
    return CaptionPrepared(plan, plan.train, splits=splits, vocab=vocab,
                           model=model_config(plan.model_options, settings.image_size, vocab,
                                              max_len))


def save(prepared: CaptionPrepared, out: Path) -> None:
    """``vocab.json`` and ``model.json``."""
    prepared.vocab.to_json(out / "vocab.json")
    write_json(out / "model.json", prepared.model.to_dict())


def reload(plan: CaptionPlan, out: Path, log: Log) -> CaptionPrepared:
    """The prepared data of the run in ``out`` (its files, and the images)."""
    return CaptionPrepared(plan, plan.train, model=read_model_config(out),
                           vocab=read_vocab(out), splits=splits_of(plan.settings,
                                                                   plan.train.seed))


def read_model_config(run: Path) -> CaptionerConfig:
    """``RUN/model.json``, its sizes checked."""
    path = Path(run) / "model.json"
    data = read_json_object(path, "the run's model settings", root=run)
    checked_sizes({k: data.get(k) for k in MODEL_SIZES}, str(path))
    try:
        return CaptionerConfig.from_dict(data)
    except (TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not a captioner config ({exc})") from None


def read_vocab(run: Path) -> Vocab:
    """``RUN/vocab.json``."""
    path = run_file(run, "vocab.json", "the run's vocabulary", limit=MAX_VOCAB_BYTES)
    try:
        return Vocab.from_json(path)
    except DataError as exc:
        raise CheckpointError(f"{run}: the run's vocabulary is unreadable: {exc}") from None


def configure(given: dict[str, Any], out: Path, stored: dict[str, Any] | None) -> CaptionPlan:
    """See `attnkit.apps.base.App.configure`: ``given`` holds ``data``, `CaptionSettings`,
    model (`MODEL_OPTIONS`) and trainer (`TRAIN_OPTIONS`) fields."""
    data = given.pop("data", None)
    parts = split_overrides(given)
    if stored is None:
        settings = CaptionSettings(data=data or "synthetic", **parts["settings"])
        # Refuse bad model options before the data is read.
        model_config(parts["model"], settings.image_size, Vocab.build([["word"]]), 1)
        return CaptionPlan(settings, train_config(settings, parts["train"]), parts["model"])
    settings = CaptionSettings.from_config(stored)
    model_cfg = read_model_config(out)
    try:
        stored_train = TrainConfig.from_dict(stored["train"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{out}: config.json has no valid train settings ({exc})") from None
    current = {**dataclasses.asdict(settings), **model_cfg.to_dict(), **stored_train.to_dict()}
    changes = check_resume(current, {"data": data, **given}, applied=RESUME_APPLIED)
    for name in ("max_minutes", "early_stopping_patience"):  # None is a value here
        if name in parts["train"]:
            changes[name] = parts["train"][name]
    return CaptionPlan(settings, train_config(settings, {**stored_train.to_dict(), **changes}),
                       stored=stored)


def load(run, *, weights: str = "best", device: str | None = None,
         engine: str | None = None) -> Loaded:
    """A trained caption run: the model (eval mode, on ``device``), its vocabulary as the
    pipeline, its ``config.json`` (the caption app's `attnkit.apps.App.load`).

    Raises:
        CheckpointError: not a caption run, broken or missing files, no such weights.
    """
    path = Path(run)
    config = read_config(path, APP)
    config.setdefault("data", CaptionSettings.from_config(config).data)  # format 1 lacks it
    model_cfg = read_model_config(path)
    vocab = read_vocab(path)
    weights_path = weights_file(path, weights)
    model = build_bounded(lambda: Captioner(model_cfg), f"{path / 'model.json'}")
    load_weights(model, weights_path)
    device = resolve_device(device)
    side = model_cfg.feature_size
    return Loaded(path, APP, model.to(device).eval(), vocab, config, device,
                  description=f"{model_cfg.attention} attention over a {side}x{side} feature "
                              f"map, LSTM {model_cfg.hidden}, {model_cfg.image_size} px")
