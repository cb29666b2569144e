"""The settings of a translate training run: one dataclass, validated, stored and read back.

`TranslateSettings` lists every keyword override `attnkit.apps.translate.train` accepts; a
value out of range, or an unknown name, is a `UsageError` naming the command-line flag. A run
stores its settings in ``config.json`` (the model config, the trainer's config and the app's
options); `stored_settings` reads them back, and `resume_settings` applies what a ``--resume``
may change (budgets) and refuses the rest. `configure` is the app's first step: the settings,
the data spec and the trainer's config of a new run or a resume, validated, nothing written.

Example:
    ```python
    s = settings_from({"arch": "transformer", "d_model": 256, "subword": 8000})
    s.train_config().lr                         # 1e-3, the Transformer's default
    settings_from({"hiden": 3})                 # UsageError: unknown translate setting(s): hiden
    ```
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from attnkit.apps.options import split_options
from attnkit.apps.runs import check_resume
from attnkit.data.translation_splits import data_spec, spec_name
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, UsageError
from attnkit.models.config import (
    ATTENTION_KINDS,
    DECODER_STYLES,
    RNN_CELLS,
    RNNSeq2SeqConfig,
    TransformerConfig,
    config_from_dict,
)
from attnkit.training import TrainConfig
from attnkit.training.config import SCHEDULES

ModelConfig = RNNSeq2SeqConfig | TransformerConfig

# Defaults tuned so that `attnkit translate train --data synthetic` reaches test BLEU >= 95 in
# about 3 minutes on 2 shared CPU cores (README has the measurement).
RNN_DEFAULTS = {"emb_dim": 64, "hidden": 128, "layers": 1, "dropout": 0.1,
                "bidirectional": True}
TRANSFORMER_DEFAULTS = {"d_model": 128, "heads": 4, "layers": 2, "ff_dim": 256,
                        "dropout": 0.1}
# Settings that size the model, per architecture; "teacher_forcing" is the model's
# teacher_forcing_ratio.
MODEL_FIELDS = {"rnn": ("emb_dim", "hidden", "layers", "window", "dropout", "teacher_forcing"),
                "transformer": ("d_model", "heads", "layers", "ff_dim", "dropout")}
OPTION_FIELDS = ("label_smoothing", "max_len", "valid_sample", "min_freq", "max_vocab",
                 "subword", "batch_tokens", "examples")
# What a --resume may change: budgets and how the run is watched, never what it computes.
RESUME_APPLIES = ("epochs", "max_minutes", "device", "progress", "examples", "strict",
                  "patience")


@dataclass
class TranslateSettings:
    """Every setting of a translate training run: the keyword ``overrides`` of
    `attnkit.apps.translate.train`.

    Data: ``seed`` (data split / synthetic corpus, initial weights, batch order),
    ``train_size`` (synthetic training pairs, default 20000), ``max_len`` (drop training pairs
    with a side longer than this many tokens), ``subword`` (a joint English+French
    sentencepiece model of about this many pieces, saved as ``RUN/subword.model``; one joint
    vocabulary, and a Transformer then shares its embeddings; None = words), ``min_freq`` /
    ``max_vocab`` (vocabulary building), ``strict`` (a malformed data line is an error instead
    of being skipped and counted).

    Model: ``arch`` (``rnn`` | ``transformer``); RNN: ``attention``, ``cell``, ``style``,
    ``emb_dim``, ``hidden``, ``layers``, ``window`` (local attention half-width),
    ``dropout``, ``teacher_forcing`` (ratio); Transformer: ``d_model``, ``heads``, ``layers``,
    ``ff_dim``, ``dropout``. None = the architecture's default (``RNN_DEFAULTS``,
    ``TRANSFORMER_DEFAULTS``).

    Training: ``epochs``, ``batch_size``, ``lr`` (None: 3e-3 rnn, 1e-3 transformer),
    ``schedule`` / ``warmup`` (None: constant/0 rnn, inverse_sqrt/300 transformer),
    ``label_smoothing``, ``batch_tokens`` (also cap a batch at this many padded tokens),
    ``eval_every`` (validate every N steps; None = once per epoch), ``valid_sample``
    (validation sentences decoded for the selection BLEU; None = all), ``max_minutes``
    (None = no budget), ``patience`` (stop after this many evaluations without a better
    BLEU; 0 = never stop early), ``device``, ``amp`` (None = the trainer's default, ``"auto"``,
    True, False), ``progress``, ``examples`` (test examples logged and put in the report).

    Raises:
        UsageError: a value out of range, or a model field of the other architecture.

    Example:
        ```python
        TranslateSettings(arch="transformer", d_model=256, subword=8000).train_config().lr
        ```
    """

    seed: int = 0
    train_size: int | None = None
    max_len: int = 30
    subword: int | None = None
    min_freq: int = 1
    max_vocab: int | None = 30000
    strict: bool = False
    arch: str = "rnn"
    attention: str = "additive"
    cell: str = "gru"
    style: str = "bahdanau"
    emb_dim: int | None = None
    hidden: int | None = None
    layers: int | None = None
    window: int | None = None
    d_model: int | None = None
    heads: int | None = None
    ff_dim: int | None = None
    dropout: float | None = None
    teacher_forcing: float | None = None
    epochs: int = 8
    batch_size: int = 64
    lr: float | None = None
    schedule: str | None = None
    warmup: int | None = None
    label_smoothing: float = 0.0
    batch_tokens: int | None = None
    eval_every: int | None = None
    valid_sample: int | None = 300
    max_minutes: float | None = 2.0
    patience: int = 3
    device: str = "auto"
    amp: bool | str | None = None
    progress: bool = True
    examples: int = 10

    def __post_init__(self) -> None:
        _validate(self)

    def model_fields(self) -> dict[str, Any]:
        """The model sizes given for this architecture, by model config name."""
        fields = {name: getattr(self, name) for name in MODEL_FIELDS[self.arch]}
        if "teacher_forcing" in fields:
            fields["teacher_forcing_ratio"] = fields.pop("teacher_forcing")
        return {k: v for k, v in fields.items() if v is not None}

    def train_config(self) -> TrainConfig:
        """The trainer's settings (model selection on validation BLEU, early stopping)."""
        rnn = self.arch == "rnn"
        extra = {} if self.amp is None else {"amp": self.amp}
        return TrainConfig(
            epochs=self.epochs, batch_size=self.batch_size,
            lr=self.lr or (3e-3 if rnn else 1e-3), seed=self.seed, device=self.device,
            max_minutes=self.max_minutes, grad_clip=1.0,
            early_stopping_patience=self.patience or None,
            select_metric="bleu", select_mode="max", progress=self.progress,
            schedule=self.schedule or ("constant" if rnn else "inverse_sqrt"),
            warmup_steps=self.warmup if self.warmup is not None else (0 if rnn else 300),
            eval_every_steps=self.eval_every, **extra)


SETTING_NAMES = tuple(f.name for f in dataclasses.fields(TranslateSettings))
_INT_MIN = {"seed": 0, "train_size": 1, "max_len": 1, "subword": 8, "min_freq": 1,
            "max_vocab": 5, "emb_dim": 1, "hidden": 1, "layers": 1, "window": 0, "d_model": 1,
            "heads": 1, "ff_dim": 1, "epochs": 1, "batch_size": 1, "warmup": 0,
            "batch_tokens": 1, "eval_every": 1, "valid_sample": 1, "examples": 0,
            "patience": 0}
_FLOAT_OK = {"dropout": (lambda x: 0 <= x < 1, "a number in [0, 1)"),
             "label_smoothing": (lambda x: 0 <= x < 1, "a number in [0, 1)"),
             "teacher_forcing": (lambda x: 0 <= x <= 1, "a number in [0, 1]"),
             "lr": (lambda x: 0 < x < math.inf, "a positive number"),
             "max_minutes": (lambda x: 0 < x < math.inf, "a positive number")}
_CHOICES = {"arch": tuple(MODEL_FIELDS), "attention": ATTENTION_KINDS, "cell": RNN_CELLS,
            "style": DECODER_STYLES, "schedule": SCHEDULES, "amp": ("auto", True, False),
            "strict": (True, False), "progress": (True, False)}


def _bad(name: str, value: Any, want: str) -> UsageError:
    return UsageError(f"--{name.replace('_', '-')} must be {want}, got {value!r}")


def _nullable(name: str) -> bool:
    field = next(f for f in dataclasses.fields(TranslateSettings) if f.name == name)
    return "None" in str(field.type)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _validate(s: TranslateSettings) -> None:
    for name in (f.name for f in dataclasses.fields(s)):
        value = getattr(s, name)
        if value is None and _nullable(name):
            continue
        if name in _INT_MIN and not (isinstance(value, int) and _is_number(value)
                                     and value >= _INT_MIN[name]):
            raise _bad(name, value, f"an integer >= {_INT_MIN[name]}")
        if name in _FLOAT_OK and not (_is_number(value) and _FLOAT_OK[name][0](value)):
            raise _bad(name, value, _FLOAT_OK[name][1])
        if name in _CHOICES and value not in _CHOICES[name]:
            raise _bad(name, value, "one of " + ", ".join(map(str, _CHOICES[name])))
    if not isinstance(s.device, str):
        raise _bad("device", s.device, "a device name (auto, cpu, cuda, cuda:N)")
    other = {n for fields in MODEL_FIELDS.values() for n in fields} - set(MODEL_FIELDS[s.arch])
    for name in sorted(other):
        if getattr(s, name) is not None:
            raise UsageError(f"--{name.replace('_', '-')} is a setting of the other "
                             f"architecture, not of --arch {s.arch}")


def _check_names(overrides: dict[str, Any]) -> None:
    split_options(overrides, {"settings": SETTING_NAMES}, "translate setting")


def settings_from(overrides: dict[str, Any],
                  base: TranslateSettings | None = None) -> TranslateSettings:
    """``base`` (default: the defaults) with ``overrides`` applied and validated.

    Raises:
        UsageError: an unknown setting (named), or an invalid value.
    """
    _check_names(overrides)
    return dataclasses.replace(base or TranslateSettings(), **overrides)


def build_model_config(s: TranslateSettings, src_vocab: Vocab, v: Vocab) -> ModelConfig:
    """The model config of a fresh run: the architecture's defaults, the sizes given, the
    vocabularies' sizes and special ids.

    Raises:
        UsageError: sizes the model refuses (e.g. heads that do not divide d_model), or a
            ``max_len`` beyond a Transformer's positions.
    """
    fields = {**(RNN_DEFAULTS if s.arch == "rnn" else TRANSFORMER_DEFAULTS), **s.model_fields()}
    if s.arch == "rnn":
        fields.update(attention=s.attention, cell=s.cell, style=s.style)
    elif s.subword:   # one joint vocabulary: one embedding table for both languages
        fields["share_embeddings"] = True
    try:
        config = config_from_dict({"arch": s.arch, "src_vocab": len(src_vocab),
                                   "tgt_vocab": len(v), "pad_id": v.pad_id, "bos_id": v.bos_id,
                                   "eos_id": v.eos_id, "unk_id": v.unk_id, **fields})
    except ValueError as exc:
        raise UsageError(f"model settings: {exc}") from None
    if isinstance(config, TransformerConfig) and s.max_len >= config.max_len:
        raise UsageError(f"--max-len {s.max_len} does not fit the Transformer's "
                         f"{config.max_len} positions (the target gets one more token)")
    return config


def stored_settings(config: dict[str, Any]) -> TranslateSettings:
    """The settings a run was trained with, read back from its ``config.json`` (any format).

    Raises:
        CheckpointError: a config.json that does not describe a translate training.
    """
    try:
        model, spec = config["model"], config["data"]
        train = TrainConfig.from_dict(config["train"])
        arch = model.get("arch", "rnn")
        names = {"teacher_forcing": "teacher_forcing_ratio"}
        flat = {f: model[names.get(f, f)] for f in MODEL_FIELDS[arch] if names.get(f, f) in model}
        if arch == "rnn":
            flat.update({k: model[k] for k in ("attention", "cell", "style")})
        flat.update({k: v for k, v in config.get("options", {}).items() if k in OPTION_FIELDS})
        flat.update(arch=arch, seed=train.seed, train_size=spec.get("train"),
                    epochs=train.epochs, batch_size=train.batch_size, lr=train.lr,
                    schedule=train.schedule, warmup=train.warmup_steps,
                    eval_every=train.eval_every_steps, max_minutes=train.max_minutes,
                    device=train.device, amp=train.amp, progress=train.progress,
                    patience=train.early_stopping_patience or 0)
        return TranslateSettings(**flat)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"config.json does not describe a translate training "
                              f"({type(exc).__name__}: {exc})") from None


def resume_settings(config: dict[str, Any], data: str | None,
                    overrides: dict[str, Any]) -> TranslateSettings:
    """The stored settings of a run with what a resume may change applied (``RESUME_APPLIES``).

    Args:
        config: the run's ``config.json``.
        data: the data given with the resume (None: not given).
        overrides: the settings given with the resume.

    Raises:
        UsageError: an unknown setting, or one that would change the run (seed, data, model,
            vocabulary, optimisation); the message names it and both values.
    """
    stored = stored_settings(config)
    _check_names(overrides)
    given = dict(overrides)
    compare = {**dataclasses.asdict(stored), "data": spec_name(config["data"])}
    if data is not None:
        given["data"] = spec_name(data_spec(data, stored.seed, stored.train_size))
    changes = check_resume(compare, given, applied=RESUME_APPLIES)
    if "max_minutes" in overrides:   # None (no budget) is a value here, not "not given"
        changes["max_minutes"] = overrides["max_minutes"]
    return settings_from(changes, stored)
