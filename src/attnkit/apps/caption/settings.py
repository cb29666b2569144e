"""What a caption run trains on and how: `CaptionSettings`, the trainer's defaults and the
model options.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from attnkit.apps import run_files
from attnkit.apps.results import AppSettings, RunSettings
from attnkit.data.caption_data import parse_spec
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, UsageError
from attnkit.models.captioner import CaptionerConfig
from attnkit.settings import check_settings, setting
from attnkit.training import TrainConfig
from attnkit.training.config import checked_train_config

# The first word stalls at "a" for many epochs before the glimpse learns to count: the budget
# that learns it on every seed (docs/results.md, "Caption training defaults").
TRAIN_DEFAULTS = {"epochs": 40, "batch_size": 32, "lr": 2e-3, "schedule": "cosine",
                  "warmup_steps": 100, "grad_clip": 5.0, "max_minutes": 20.0}
# CaptionerConfig fields that follow from the data and the vocabulary, not from options.
_DERIVED = ("vocab_size", "image_size", "feature_size", "max_caption_len", "pad_id", "bos_id",
            "eos_id", "unk_id", "arch", "version")
MODEL_OPTIONS = tuple(f.name for f in dataclasses.fields(CaptionerConfig) if f.name not in _DERIVED)
MODEL_SIZES = ("vocab_size", "image_size", "feature_size", "channels", "emb_dim", "hidden",
               "attention_units", "max_caption_len", "glimpses")
# The app chooses how checkpoints are selected (accuracy, or BLEU on real data).
TRAIN_OPTIONS = tuple(f.name for f in dataclasses.fields(TrainConfig)
                      if not f.name.startswith("select_"))
# What a resume may change: budgets and how it runs, never what it computes.
RESUME_APPLIED = ("epochs", "max_minutes", "progress", "device", "early_stopping_patience")
# The help of the options every app shares, with the defaults above.
TRAIN_HELP = {"epochs": f"passes over the training scenes (default {TRAIN_DEFAULTS['epochs']})",
              "batch_size": f"images per batch (default {TRAIN_DEFAULTS['batch_size']})",
              "lr": f"peak learning rate, {TRAIN_DEFAULTS['schedule']} schedule (default "
                    f"{TRAIN_DEFAULTS['lr']:g})",
              "max_minutes": "stop cleanly after this wall-clock budget (0 = no budget) "
                             f"(default {TRAIN_DEFAULTS['max_minutes']:g})"}


_FRACTION = (lambda x: 0 < x < 0.5, "a number between 0 and 0.5")


@dataclass
class CaptionSettings(AppSettings):
    """What a caption run trains on, besides the model (`MODEL_OPTIONS`) and the trainer's
    settings. ``data``: ``"synthetic"``, ``"flickr:TOKEN_FILE:IMAGE_DIR"`` or
    ``"coco:JSON:IMAGE_DIR"``. ``attention_supervision`` > 0 trains on the boxes the grounding
    figures score, so those figures then measure fitting. UsageError: a bad value.
    """

    app: ClassVar[str] = "caption"
    model_options: ClassVar[tuple[str, ...]] = MODEL_OPTIONS
    train_options: ClassVar[tuple[str, ...]] = TRAIN_OPTIONS
    resume_applies: ClassVar[tuple[str, ...]] = RESUME_APPLIED

    data: str = "synthetic"
    num_train: int = setting(6000, "synthetic training scenes", low=1)
    num_valid: int = setting(300, "synthetic validation scenes", low=1)
    num_test: int = setting(500, "synthetic test scenes (eval: the run's unless given)", low=1,
                            commands=("train", "eval"))
    image_size: int = setting(64, "image side in pixels, a multiple of 8 from 32 to 1024",
                              low=32, metavar="S")
    valid_fraction: float = setting(0.05, "real data: share of images held out for "
                                    "validation, and as many for test", valid=_FRACTION,
                                    metavar="F")
    attention_supervision: float = setting(
        0.0, "weight of supervised attention on the synthetic ducks' boxes (0: attention "
        "learned from captions only; > 0 trains on what the grounding figures score)",
        valid=(lambda x: 0 <= x < math.inf, "a number >= 0"), metavar="W")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.image_size % 8 or self.image_size > 1024:
            raise UsageError(f"--image-size must be a multiple of 8 from 32 to 1024, "
                             f"got {self.image_size}")
        if not isinstance(self.data, str):
            raise UsageError(f"data must be a string, got {self.data!r}")
        if self.data != "synthetic":
            parse_spec(self.data)
            if self.attention_supervision > 0:
                raise UsageError("attention_supervision needs synthetic data (its boxes), "
                                 f"got data={self.data!r}")

    def data_settings(self) -> dict[str, Any]:
        """The ``config.json["data_settings"]`` of a run (everything but the supervision)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "attention_supervision"}

    @classmethod
    def fresh(cls, data: Any, parts: dict[str, dict[str, Any]]) -> RunSettings:
        settings = cls(data=data or "synthetic", **parts["settings"])
        # Refuse bad model options before the data is read.
        model_config(parts["model"], settings.image_size, Vocab.build([["word"]]), 1)
        return RunSettings(settings, train_config(settings, parts["train"]),
                           model_options=parts["model"])

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CaptionSettings:
        """The settings stored in a run's ``config.json``; CheckpointError: missing or invalid."""
        try:
            return cls(**config["data_settings"], attention_supervision=float(
                config.get("attention_supervision", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"config.json: no valid caption data settings ({exc})") from None

    @classmethod
    def stored(cls, config: dict[str, Any], out: Path) -> tuple[Any, dict[str, Any]]:
        settings = cls.from_config(config)
        return settings, {**dataclasses.asdict(settings), **read_model_config(out).to_dict()}


def read_model_config(run: Path) -> CaptionerConfig:
    """``RUN/model.json``, its sizes checked."""
    return run_files.read_model_config(run, CaptionerConfig.from_dict, MODEL_SIZES,
                                       what="a captioner config")


def train_config(settings: CaptionSettings, values: dict[str, Any]) -> TrainConfig:
    """The TrainConfig of a run: the app's defaults and selection, then ``values`` (UsageError)."""
    select = "accuracy" if settings.data == "synthetic" else "bleu4"
    # Validation accuracy reaches 1.0 long before training ends on the ducks; the loss then
    # picks the later, better-trained checkpoint among those ties.
    return checked_train_config({**TRAIN_DEFAULTS, **values, "select_metric": select,
                                 "select_mode": "max", "select_tiebreak": "loss"})


def model_config(options: dict[str, Any], image_size: int, vocab: Vocab,
                 max_len: int) -> CaptionerConfig:
    """The captioner of a new run: its options, sized by the images and the vocabulary."""
    try:
        return CaptionerConfig(**{
            "image_size": image_size, "feature_size": image_size // 8, **options,
            "max_caption_len": max_len, "vocab_size": len(vocab),
            "pad_id": vocab.pad_id, "bos_id": vocab.bos_id, "eos_id": vocab.eos_id,
            "unk_id": vocab.unk_id})
    except (TypeError, ValueError) as exc:
        raise UsageError(f"model option: {exc}") from None
