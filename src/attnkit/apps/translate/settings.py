"""The settings of a translate training run: `TranslateSettings`, the home of every default,
validated, stored in ``config.json`` and read back (`stored_settings`) for a resume
(`attnkit.apps.results.AppSettings.configure`). The options are generated from its fields.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from attnkit.apps.results import AppSettings, RunSettings
from attnkit.data.translation_splits import SYNTHETIC_SIZES, data_spec, spec_name
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
from attnkit.settings import bad_value, check_settings, setting
from attnkit.training import TrainConfig
from attnkit.training.config import SCHEDULES, checked_train_config

ModelConfig = RNNSeq2SeqConfig | TransformerConfig

# Settings that size the model, per architecture (their defaults: each field's `defaults`);
# "teacher_forcing" is the model's teacher_forcing_ratio.
MODEL_FIELDS = {"rnn": ("emb_dim", "hidden", "layers", "window", "dropout", "teacher_forcing"),
                "transformer": ("d_model", "heads", "layers", "ff_dim", "dropout")}
MODEL_NAMES = {"teacher_forcing": "teacher_forcing_ratio"}
OPTION_FIELDS = ("label_smoothing", "max_len", "valid_sample", "min_freq", "max_vocab",
                 "subword", "batch_tokens", "examples", "align_loss", "align_layer")
# What a --resume may change: budgets and how the run is watched, never what it computes.
RESUME_APPLIES = ("epochs", "max_minutes", "device", "progress", "examples", "strict", "patience")
# Settings the trainer's TrainConfig stores under the same name.
SAME_IN_TRAIN = ("seed", "epochs", "batch_size", "lr", "schedule", "max_minutes", "device", "amp",
                 "compile", "progress")
_RATE = (lambda x: 0 <= x < 1, "a number in [0, 1)")
_POSITIVE = (lambda x: 0 < x < math.inf, "a positive number")


@dataclass
class TranslateSettings(AppSettings):
    """Every setting of a translate training run (the ``overrides`` of
    `attnkit.apps.translate.train`); None takes the architecture's default (the field's
    ``defaults``). UsageError: a value out of range, a model field of the other architecture.
    """

    app: ClassVar[str] = "translate"
    resume_applies: ClassVar[tuple[str, ...]] = RESUME_APPLIES

    seed: int = setting(0, low=0)
    train_size: int | None = setting(None, "synthetic training pairs",
                                     shown=str(SYNTHETIC_SIZES["train"]), low=1)
    max_len: int = setting(30, "drop training pairs longer than this many tokens", low=1)
    subword: int | None = setting(None, "joint English+French sentencepiece vocabulary of about "
                                  "N pieces, trained on the training text and saved in the run",
                                  shown="words", low=8)
    min_freq: int = setting(1, "keep words seen this often in training", low=1)
    max_vocab: int | None = setting(30000, "largest vocabulary per language, specials "
                                    "included", low=5)
    strict: bool = setting(False, "a malformed data line is an error", choices=(True, False),
                           shown="skipped and counted", commands=("train", "eval"))
    arch: str = setting("rnn", "model", choices=tuple(MODEL_FIELDS))
    attention: str = setting("additive", "RNN score; none = fixed-length context baseline",
                             choices=ATTENTION_KINDS)
    cell: str = setting("gru", "RNN cell", choices=RNN_CELLS)
    style: str = setting("bahdanau", "RNN decoder style", choices=DECODER_STYLES)
    emb_dim: int | None = setting(None, "RNN embedding size", defaults={"rnn": 64}, low=1)
    hidden: int | None = setting(None, "RNN hidden size", defaults={"rnn": 128}, low=1)
    layers: int | None = setting(None, "RNN or Transformer layers",
                                 defaults={"rnn": 1, "transformer": 2}, low=1)
    window: int | None = setting(None, "local attention half-width D", defaults={"rnn": 5}, low=0)
    d_model: int | None = setting(None, "Transformer width", defaults={"transformer": 128}, low=1)
    heads: int | None = setting(None, "Transformer heads", defaults={"transformer": 4}, low=1)
    ff_dim: int | None = setting(None, "Transformer feed-forward size",
                                 defaults={"transformer": 256}, low=1)
    dropout: float | None = setting(None, "dropout", defaults={"rnn": 0.1, "transformer": 0.1},
                                    valid=_RATE)
    teacher_forcing: float | None = setting(
        None, "probability of feeding the gold token (RNN)", defaults={"rnn": 1.0},
        valid=(lambda x: 0 <= x <= 1, "a number in [0, 1]"))
    epochs: int = setting(8, "passes over the training pairs", low=1)
    batch_size: int = setting(64, "sentence pairs per batch", low=1)
    lr: float | None = setting(None, "learning rate", defaults={"rnn": 3e-3, "transformer": 1e-3},
                               valid=_POSITIVE)
    schedule: str | None = setting(None, "learning-rate schedule; linear/cosine reach 0 at the "
                                   "end of --epochs", choices=SCHEDULES,
                                   defaults={"rnn": "constant", "transformer": "inverse_sqrt"})
    warmup: int | None = setting(None, "warm-up steps", defaults={"rnn": 0, "transformer": 300},
                                 low=0)
    label_smoothing: float = setting(0.0, "label smoothing of the loss", valid=_RATE)
    align_loss: float | None = setting(
        None, "weight of an alignment loss (Garg et al. 2019; 0.05 there): one cross-attention "
        "head learns eflomal's links of the training pairs as the Transformer trains (pip "
        "install 'attnkit[align]')", shown="off", valid=_POSITIVE)
    align_layer: int | None = setting(None, "the decoder layer whose first head --align-loss "
                                      "trains", shown="the one before the last", low=1)
    batch_tokens: int | None = setting(None, "also cap each batch at N padded tokens (per "
                                       "side)", shown="no cap", low=1)
    eval_every: int | None = setting(None, "validate every N steps",
                                     shown="once per epoch and at the stop", low=1)
    valid_sample: int | None = setting(300, "validation sentences decoded for model selection",
                                       low=1)
    max_minutes: float | None = setting(2.0, "stop cleanly after this wall-clock budget "
                                        "(0 = no budget)", valid=_POSITIVE)
    patience: int = setting(3, "stop after N evaluations without a better validation BLEU "
                            "(0 = never stop early)", low=0)
    device: str = "auto"
    amp: bool | str | None = setting(None, choices=("auto", True, False))
    compile: bool | str = setting("auto", choices=("auto", "on", "off", True, False))
    progress: bool = setting(True, choices=(True, False))
    examples: int = setting(10, "test examples shown (train: printed and in report.html; eval: "
                            "on the --report page)", low=0, commands=("train", "eval"))

    def __post_init__(self) -> None:
        check_settings(self)
        if not isinstance(self.device, str):
            raise bad_value("--device", self.device, "a device name (auto, cpu, cuda, cuda:N)")
        if self.arch != "transformer" and (self.align_loss or self.align_layer):
            raise UsageError("--align-loss trains a Transformer's attention head: use it with "
                             "--arch transformer")
        mine = set(MODEL_FIELDS[self.arch])
        for name in sorted({n for names in MODEL_FIELDS.values() for n in names} - mine):
            if getattr(self, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')} is a setting of the other "
                                 f"architecture, not of --arch {self.arch}")

    def value(self, name: str) -> Any:
        """A setting, or its architecture's default (the field's ``defaults``) when None."""
        given = getattr(self, name)
        return FIELDS[name].metadata["defaults"][self.arch] if given is None else given

    def train_config(self) -> TrainConfig:
        """The trainer's settings (model selection on validation BLEU, early stopping)."""
        extra = {} if self.amp is None else {"amp": self.amp}
        return checked_train_config(dict(
            epochs=self.epochs, batch_size=self.batch_size, lr=self.value("lr"), seed=self.seed,
            device=self.device, max_minutes=self.max_minutes, grad_clip=1.0,
            early_stopping_patience=self.patience or None, select_metric="bleu",
            select_mode="max", progress=self.progress, schedule=self.value("schedule"),
            warmup_steps=self.value("warmup"), eval_every_steps=self.eval_every,
            compile=self.compile, **extra))

    @classmethod
    def fresh(cls, data: Any, parts: dict[str, dict[str, Any]]) -> RunSettings:
        s = cls(**parts["settings"])
        return RunSettings(s, s.train_config(),
                           spec=data_spec(data or "synthetic", s.seed, s.train_size))

    @classmethod
    def stored(cls, config: dict[str, Any], out: Any) -> tuple[Any, dict[str, Any]]:
        s = stored_settings(config)
        return s, {**dataclasses.asdict(s), "data": spec_name(config["data"])}

    def resume_given(self, given: dict[str, Any]) -> dict[str, Any]:
        data = given["data"]
        return {**given, "data": data and spec_name(data_spec(data, self.seed, self.train_size))}


FIELDS = {f.name: f for f in dataclasses.fields(TranslateSettings)}


def build_model_config(s: TranslateSettings, src_vocab: Vocab, v: Vocab) -> ModelConfig:
    """The model config of a fresh run: the sizes given or the architecture's defaults, and the
    vocabularies' sizes and ids. UsageError: sizes the model refuses (heads not dividing
    d_model), a ``max_len`` beyond a Transformer's positions.
    """
    fields = {MODEL_NAMES.get(n, n): s.value(n) for n in MODEL_FIELDS[s.arch]}
    if s.arch == "rnn":
        fields.update(bidirectional=True, attention=s.attention, cell=s.cell, style=s.style)
    elif s.subword:   # one joint vocabulary: one embedding table for both languages
        fields["share_embeddings"] = True
    try:
        config = config_from_dict({"arch": s.arch, "src_vocab": len(src_vocab),
                                   "tgt_vocab": len(v), "pad_id": v.pad_id, "bos_id": v.bos_id,
                                   "eos_id": v.eos_id, "unk_id": v.unk_id, **fields})
    except ValueError as exc:
        raise UsageError(f"model settings: {exc}") from None
    if s.align_layer and s.align_layer > config.layers:
        raise UsageError(f"--align-layer {s.align_layer}: the decoder has {config.layers} "
                         "layers")
    if isinstance(config, TransformerConfig) and s.max_len >= config.max_len:
        raise UsageError(f"--max-len {s.max_len} does not fit the Transformer's "
                         f"{config.max_len} positions (the target gets one more token)")
    return config


def align_layer(s: TranslateSettings, config: ModelConfig) -> int:
    """The 0-based decoder layer the alignment loss trains: ``--align-layer``, else the one
    before the last (Garg et al.'s choice; the only one of a one-layer decoder)."""
    return (s.align_layer or max(config.layers - 1, 1)) - 1


def stored_settings(config: dict[str, Any]) -> TranslateSettings:
    """The settings a run was trained with, from its ``config.json``; CheckpointError: not a
    translate training's.
    """
    try:
        model, spec = config["model"], config["data"]
        train = TrainConfig.from_dict(config["train"])
        arch = model.get("arch", "rnn")
        flat = {f: model[MODEL_NAMES.get(f, f)] for f in MODEL_FIELDS[arch]
                if MODEL_NAMES.get(f, f) in model}
        if arch == "rnn":
            flat.update({k: model[k] for k in ("attention", "cell", "style")})
        flat.update({k: v for k, v in config.get("options", {}).items() if k in OPTION_FIELDS})
        flat.update({k: getattr(train, k) for k in SAME_IN_TRAIN}, arch=arch,
                    train_size=spec.get("train"), warmup=train.warmup_steps,
                    eval_every=train.eval_every_steps, patience=train.early_stopping_patience or 0)
        return TranslateSettings(**flat)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"config.json does not describe a translate training "
                              f"({type(exc).__name__}: {exc})") from None
