"""What a caption run trains on and how: `CaptionSettings`, the trainer's defaults and the
model options (`attnkit.apps.caption.prepare.configure` validates a run's).

Example:
    ```python
    settings = CaptionSettings(num_train=64)
    train_config(settings, {"epochs": 2}).select_metric            # "accuracy"
    ```
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from attnkit.apps.options import resolve_device, split_options
from attnkit.data.caption_data import parse_spec
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, UsageError
from attnkit.models.captioner import CaptionerConfig
from attnkit.training import TrainConfig

APP = "caption"
# The first word stalls at "a" for 8-20 epochs before the glimpse learns to count; 40 epochs at
# 2e-3 reached 0.998-1.0 exact match in 6 of 6 seeds (30 epochs: 2 of 3; 12 epochs: 0.86).
TRAIN_DEFAULTS = {"epochs": 40, "batch_size": 32, "lr": 2e-3, "schedule": "cosine",
                  "warmup_steps": 100, "grad_clip": 5.0, "max_minutes": 20.0}
# CaptionerConfig fields that follow from the data and the vocabulary, not from options.
_DERIVED = ("vocab_size", "image_size", "feature_size", "max_caption_len", "pad_id", "bos_id",
            "eos_id", "unk_id", "arch", "version")
MODEL_OPTIONS = tuple(f.name for f in dataclasses.fields(CaptionerConfig)
                      if f.name not in _DERIVED)
# The app chooses how checkpoints are selected (accuracy, or BLEU on real data).
TRAIN_OPTIONS = tuple(f.name for f in dataclasses.fields(TrainConfig)
                      if not f.name.startswith("select_"))
# What a resume may change: budgets and how it runs, never what it computes.
RESUME_APPLIED = ("epochs", "max_minutes", "progress", "device", "early_stopping_patience")


@dataclass
class CaptionSettings:
    """What a caption run trains on, besides the model and the trainer's settings.

    Args:
        data: ``"synthetic"``, ``"flickr:TOKEN_FILE:IMAGE_DIR"`` or ``"coco:JSON:IMAGE_DIR"``.
        num_train, num_valid, num_test: synthetic set sizes.
        image_size: image side in pixels (a multiple of 8, >= 32; the feature map is ``S / 8``).
        valid_fraction: share of real images held out for validation (and as many for test).
        attention_supervision: weight of supervised attention (synthetic data only): the loss
            adds ``-log`` of each named word's attention mass inside its ducks' boxes
            (`attnkit.models.captioner.attention_supervision_penalty`). 0 = attention is
            learned from the captions alone, as in the paper; > 0 trains on the very boxes
            the grounding figures score, so those figures then measure fitting.

    Raises:
        UsageError: a value that cannot work (named).
    """

    data: str = "synthetic"
    num_train: int = 6000
    num_valid: int = 300
    num_test: int = 500
    image_size: int = 64
    valid_fraction: float = 0.05
    attention_supervision: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_train", "num_valid", "num_test", "image_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive whole number, got {value!r}")
        if self.image_size % 8 or not 32 <= self.image_size <= 1024:
            raise UsageError(f"image_size must be a multiple of 8 from 32 to 1024, "
                             f"got {self.image_size}")
        fraction, w = self.valid_fraction, self.attention_supervision
        if not (_is_number(fraction) and 0 < fraction < 0.5):
            raise UsageError(f"valid_fraction must be between 0 and 0.5, got {fraction!r}")
        if not (_is_number(w) and math.isfinite(w) and w >= 0):
            raise UsageError(f"attention_supervision must be a number >= 0, got {w!r}")
        if not isinstance(self.data, str):
            raise UsageError(f"data must be a string, got {self.data!r}")
        if self.data != "synthetic":
            parse_spec(self.data)
            if w > 0:
                raise UsageError("attention_supervision needs synthetic data (its boxes), "
                                 f"got data={self.data!r}")

    def data_settings(self) -> dict[str, Any]:
        """The ``config.json["data_settings"]`` of a run (everything but the supervision)."""
        out = dataclasses.asdict(self)
        del out["attention_supervision"]
        return out

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CaptionSettings:
        """The settings stored in a run's ``config.json`` (format 1 or 2).

        Raises:
            CheckpointError: missing or invalid settings.
        """
        try:
            stored = dict(config["data_settings"])
            return cls(**stored, attention_supervision=float(
                config.get("attention_supervision", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"config.json: no valid caption data settings ({exc})") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class CaptionPlan:
    """A training's validated settings (`configure`)."""

    settings: CaptionSettings
    train: TrainConfig
    model_options: dict[str, Any] = field(default_factory=dict)
    stored: dict[str, Any] | None = None


def split_overrides(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``overrides`` by owner (settings, model, train); None values dropped, but
    ``max_minutes=None`` (no budget) kept; ``patience`` is the trainer's
    ``early_stopping_patience`` (0: never)."""
    overrides = dict(overrides)
    if "patience" in overrides:
        overrides["early_stopping_patience"] = overrides.pop("patience") or None
    kept = {k: v for k, v in overrides.items()
            if v is not None or k in ("max_minutes", "early_stopping_patience")}
    return split_options(kept, {
        "settings": {f.name for f in dataclasses.fields(CaptionSettings)} - {"data"},
        "model": MODEL_OPTIONS, "train": TRAIN_OPTIONS}, "caption option")


def train_config(settings: CaptionSettings, values: dict[str, Any]) -> TrainConfig:
    """The TrainConfig of a run: the app's defaults and checkpoint selection, then ``values``.

    Raises:
        UsageError: a value TrainConfig refuses.
    """
    select = "accuracy" if settings.data == "synthetic" else "bleu4"
    # Validation accuracy reaches 1.0 long before training ends (after 12-21 of 40 epochs
    # on the ducks); the loss then picks the later, better-trained checkpoint among those ties.
    try:
        cfg = TrainConfig(**{**TRAIN_DEFAULTS, **values, "select_metric": select,
                             "select_mode": "max", "select_tiebreak": "loss"})
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    resolve_device(cfg.device)
    return cfg


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
