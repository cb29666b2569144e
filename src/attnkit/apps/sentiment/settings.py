"""What a sentiment run is made of, checked: the presets (`PRESETS`; the recipes and their
figures: docs/guide/sentiment.md, docs/results.md), `SentimentSettings`, the model they build, and
the rules of a fresh run and of a resume (validated before anything is written).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from attnkit.apps.results import TRAIN_FIELDS, AppSettings, RunSettings
from attnkit.apps.run_files import CONFIG_FILE
from attnkit.data.imdb import has_split
from attnkit.errors import CheckpointError, UsageError
from attnkit.models.sentiment import SentimentConfig
from attnkit.settings import cases_text, check_settings, is_number, setting
from attnkit.training.config import checked_train_config
from attnkit.training.run_folder import checked_sizes

PRESETS: dict[str, dict] = {
    "keras2018": {
        "tokenizer": "word", "num_words": 30000, "maxlen": 100, "truncating": "pre",
        "valid_fraction": 0.1,
        "model": {},  # SentimentConfig defaults are the 2018 model
        "train": {"epochs": 5, "batch_size": 64, "lr": 1e-3, "grad_clip": None,
                  "schedule": "constant"},
    },
    "best": {
        "tokenizer": "word", "num_words": 100000, "maxlen": 800, "truncating": "pre",
        "valid_fraction": 0.04,
        "model": {"embed_dim": 64, "num_heads": 4, "head_dim": 16, "block": "transformer",
                  "ffn_dim": 128, "positional": "learned", "pooling": "attention",
                  "dropout": 0.3, "block_dropout": 0.2, "attn_bias": True,
                  "attn_out_proj": True, "bigram_buckets": 1 << 20},
        "train": {"epochs": 1, "batch_size": 64, "lr": 2e-3, "grad_clip": 1.0,
                  "schedule": "linear", "warmup_steps": 100, "weight_decay": 0.0},
    },
}
TOKENIZERS = ("word", "char", "subword")
# What a resume may change: budgets, and where and how it runs (not what it computes).
RESUME_APPLIED = ("epochs", "max_minutes", "device", "amp", "progress", "num_workers",
                  "early_stopping_patience")
# The help of the options every app shares, with the defaults of the presets.
TRAIN_HELP = {
    name: f"{text} (default {cases_text({p: s['train'][name] for p, s in PRESETS.items()})})"
    for name, text in (("epochs", "passes over the training reviews"),
                       ("batch_size", "reviews per batch"), ("lr", "learning rate"))}
# The model's sizes, checked before it is built (a stored model.json may have been edited).
MODEL_SIZES = ("vocab_size", "maxlen", "embed_dim", "num_heads", "head_dim", "num_layers",
               "ffn_dim", "bigram_buckets")
# Model fields that come from the run's settings, not from model overrides.
MODEL_FROM_SETTINGS = ("vocab_size", "maxlen", "mask_padding", "padding")


def _by_preset(key: str) -> dict[str, Any]:
    return {name: spec[key] for name, spec in PRESETS.items()}


@dataclass
class SentimentSettings(AppSettings):
    """What a sentiment run is made of besides the trainer's `TrainConfig` (whose fields `train`
    also takes): None means the preset's (the field's ``defaults``); ``config.json`` stores them
    `resolved`. ``data``: what `attnkit.data.imdb.load_split` reads; ``model_overrides``:
    `SentimentConfig` fields. UsageError: a value out of bounds.
    """

    app: ClassVar[str] = "sentiment"
    train_options: ClassVar[tuple[str, ...]] = TRAIN_FIELDS
    resume_applies: ClassVar[tuple[str, ...]] = RESUME_APPLIED

    preset: str = setting("keras2018", "model and recipe", choices=tuple(PRESETS))
    data: str | None = None
    valid_fraction: float | None = setting(
        None, "share of train held out for validation/selection",
        defaults=_by_preset("valid_fraction"), valid=(lambda x: 0 < x < 1, "between 0 and 1"))
    test_data: str | None = setting(None, "test split location", shown="--data when it has one")
    track_test: bool = setting(True, "do not log test accuracy after each epoch",
                               flag="--no-test-curve", const=False)
    mask_padding: bool = setting(True, "the 2018 behaviour: padding is attended and max-pooled",
                                 flag="--no-mask", const=False)
    padding: str = setting("pre", "padding side", choices=("pre", "post"))
    tokenizer: str | None = setting(None, "override the preset's tokenizer", choices=TOKENIZERS,
                                    defaults=_by_preset("tokenizer"))
    skip_bad: bool = setting(False, "skip (and count) malformed records",
                             commands=("train", "eval"))
    num_words: int | None = setting(None, "vocabulary size, padding and unknown included",
                                    defaults=_by_preset("num_words"), low=2)
    maxlen: int | None = setting(None, "tokens kept per review", defaults=_by_preset("maxlen"),
                                 low=1)
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self)

    def resolved(self) -> SentimentSettings:
        """A copy with the preset's values filled in (each field's ``defaults``) and data
        paths made absolute."""
        test = self.test_data
        if test is None and self.data is not None and has_split(self.data, "test"):
            test = self.data
        preset = {f.name: f.metadata["defaults"][self.preset] for f in dataclasses.fields(self)
                  if "defaults" in f.metadata and getattr(self, f.name) is None}
        return dataclasses.replace(self, data=data_key(self.data), test_data=data_key(test),
                                   **preset)

    def check(self) -> None:
        """Raise UsageError naming the option of the first bad value (call on a resolved copy:
        the fields' own bounds were checked when it was made)."""
        if self.data is None:
            raise UsageError("give the training data with --data")
        model_config(self)

    @classmethod
    def fresh(cls, data: Any, parts: dict[str, dict[str, Any]]) -> RunSettings:
        settings = cls(data=data, **parts["settings"], model_overrides=parts["model"]).resolved()
        settings.check()
        return RunSettings(settings, checked_train_config({
            **PRESETS[settings.preset]["train"], "select_metric": "accuracy",
            "select_mode": "max", **parts["train"]}))

    @classmethod
    def stored(cls, config: dict[str, Any], out: Path) -> tuple[Any, dict[str, Any]]:
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            settings = cls(**{k: v for k, v in config.items() if k in names})
            settings.check()
        except UsageError as exc:
            raise CheckpointError(f"{out / CONFIG_FILE}: bad stored settings ({exc})") from None
        return settings, {**dataclasses.asdict(settings), **(config.get("model") or {})}

    def resume_given(self, given: dict[str, Any]) -> dict[str, Any]:
        return {**given, **{k: data_key(given[k]) for k in ("data", "test_data") if k in given}}


def data_key(path: str | os.PathLike | None) -> str | None:
    """A data location as stored and compared: an absolute path, or ``"download"``."""
    return path and ("download" if str(path) == "download" else os.path.abspath(path))


def model_config(settings: SentimentSettings) -> SentimentConfig:
    """The model of resolved ``settings``; UsageError: an unknown or bad model override."""
    overrides = dict(settings.model_overrides or {})
    known = {f.name for f in dataclasses.fields(SentimentConfig)} - set(MODEL_FROM_SETTINGS)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UsageError(f"unknown model override(s) {unknown}; known: {sorted(known)} "
                         "(vocabulary size, maxlen, padding and masking have options of their own)")
    cfg = SentimentConfig(**{**PRESETS[settings.preset]["model"], **overrides,
                             "vocab_size": settings.num_words, "maxlen": settings.maxlen,
                             "mask_padding": settings.mask_padding, "padding": settings.padding})
    try:
        checked_sizes({n: getattr(cfg, n) for n in MODEL_SIZES}, "bad model settings",
                      zero_ok=("bigram_buckets",))
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    bad = [n for n in ("dropout", "block_dropout") if not is_number(getattr(cfg, n))
           or not 0 <= getattr(cfg, n) < 1]
    try:
        if bad:
            raise ValueError(f"{', '.join(bad)} must be numbers in [0, 1)")
        cfg.check()
    except ValueError as exc:
        raise UsageError(f"bad model settings: {exc}") from None
    return cfg
