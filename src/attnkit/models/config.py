"""Model configurations: plain dataclasses that round-trip through JSON (`JsonConfig`).

The translate app writes ``config.to_dict()`` into ``RUN/config.json`` and rebuilds the network
with `attnkit.models.build_model` (``config_from_dict`` + constructor).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

ATTENTION_KINDS = ("additive", "bahdanau", "dot", "scaled_dot", "general", "concat",
                   "local-m", "local-p", "none")
RNN_CELLS = ("gru", "lstm")
DECODER_STYLES = ("bahdanau", "luong")


def check_choices(config: Any, **choices: tuple) -> None:
    """ValueError unless each named field of ``config`` is one of its allowed values."""
    for name, allowed in choices.items():
        if getattr(config, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(config, name)!r}")


def _check_vocabs(config: RNNSeq2SeqConfig | TransformerConfig) -> None:
    if config.src_vocab <= 0 or config.tgt_vocab <= 0:
        raise ValueError(f"src_vocab and tgt_vocab must be > 0, got {config.src_vocab}, "
                         f"{config.tgt_vocab}")


class JsonConfig:
    """A dataclass of JSON scalars: ``to_dict`` and its inverse ``from_dict``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """Inverse of `to_dict`; unknown keys raise ValueError (naming them)."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown {cls.__name__} keys: {unknown}")
        return cls(**data)


@dataclass
class SpecialIds(JsonConfig):
    """Token ids the models need: padding, begin and end of sentence, unknown word."""

    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3


@dataclass
class RNNSeq2SeqConfig(SpecialIds):
    """An RNN encoder-decoder (Bahdanau et al. 2015 / Luong et al. 2015 / Cho et al. 2014):
    sizes (``hidden`` per direction), ``cell`` ``"gru"``/``"lstm"``; ``attention`` an attnkit
    score kind (`attnkit.attention.factory.create`) or ``"none"``, ``style`` ``"bahdanau"``
    (attend before the RNN step) or ``"luong"`` (after, input feeding); ``attention_units``,
    ``window``: additive/concat units, local attention's half-width; below a
    ``teacher_forcing_ratio`` of 1, training feeds the model's own greedy prediction otherwise."""

    src_vocab: int = 0
    tgt_vocab: int = 0
    emb_dim: int = 128
    hidden: int = 256
    layers: int = 1
    cell: str = "gru"
    bidirectional: bool = True
    dropout: float = 0.1
    attention: str = "additive"
    style: str = "bahdanau"
    attention_units: int | None = None
    window: int = 5
    teacher_forcing_ratio: float = 1.0
    arch: str = "rnn"

    def __post_init__(self) -> None:
        _check_vocabs(self)
        check_choices(self, cell=RNN_CELLS, style=DECODER_STYLES, attention=ATTENTION_KINDS)
        if not 0.0 <= self.teacher_forcing_ratio <= 1.0:
            raise ValueError(f"teacher_forcing_ratio must lie in [0, 1], "
                             f"got {self.teacher_forcing_ratio}")
        if self.layers < 1 or self.hidden < 1 or self.emb_dim < 1:
            raise ValueError("layers, hidden and emb_dim must be >= 1")


@dataclass
class TransformerConfig(SpecialIds):
    """A pre-norm Transformer encoder-decoder (Vaswani et al. 2017): sizes (``layers`` each
    side); ``dropout`` on embeddings, attention outputs and feed-forward; ``max_len`` and
    ``positional`` (``"sinusoidal"`` or ``"learned"``) of the positions; ``tie_embeddings``:
    the target embedding is the output projection; ``share_embeddings``: one table for both
    sides (needs ``src_vocab == tgt_vocab``)."""

    src_vocab: int = 0
    tgt_vocab: int = 0
    d_model: int = 256
    heads: int = 4
    layers: int = 3
    ff_dim: int = 512
    dropout: float = 0.1
    max_len: int = 512
    positional: str = "sinusoidal"
    tie_embeddings: bool = True
    share_embeddings: bool = False
    arch: str = "transformer"

    def __post_init__(self) -> None:
        _check_vocabs(self)
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        check_choices(self, positional=("sinusoidal", "learned"))
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"share_embeddings needs one joint vocabulary, got src_vocab "
                             f"{self.src_vocab} != tgt_vocab {self.tgt_vocab}")


CONFIG_CLASSES = {"rnn": RNNSeq2SeqConfig, "transformer": TransformerConfig}


def config_from_dict(data: dict[str, Any]) -> RNNSeq2SeqConfig | TransformerConfig:
    """Rebuild a translation model's config from `to_dict` output (its ``arch`` picks the class);
    unknown keys raise ValueError (naming them)."""
    arch = data.get("arch", "rnn")
    if arch not in CONFIG_CLASSES:
        raise ValueError(f"unknown model arch {arch!r}; expected one of {sorted(CONFIG_CLASSES)}")
    return CONFIG_CLASSES[arch].from_dict(data)
