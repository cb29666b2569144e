"""Model configurations as plain dataclasses that round-trip through JSON.

The translate app writes ``config.to_dict()`` into ``RUN/config.json`` and rebuilds the exact
network later with `attnkit.models.build_model` (``config_from_dict`` + constructor), so
every field here is a JSON scalar.

Example:
    ```python
    cfg = RNNSeq2SeqConfig(src_vocab=100, tgt_vocab=120, attention="additive")
    same = config_from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert same == cfg
    ```
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

ATTENTION_KINDS = ("additive", "bahdanau", "dot", "scaled_dot", "general", "concat",
                   "local-m", "local-p", "none")
RNN_CELLS = ("gru", "lstm")
DECODER_STYLES = ("bahdanau", "luong")


@dataclass
class SpecialIds:
    """Token ids the models need: padding, begin and end of sentence, unknown word."""

    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3


@dataclass
class RNNSeq2SeqConfig(SpecialIds):
    """An RNN encoder-decoder (Bahdanau et al. 2015 / Luong et al. 2015 / Cho et al. 2014).

    Args:
        src_vocab, tgt_vocab, emb_dim, hidden, layers: sizes (``hidden`` per direction).
        cell, bidirectional, dropout: ``"gru"``/``"lstm"``; a bidirectional encoder.
        attention: an attnkit score kind (`attnkit.attention.factory.create`) or ``"none"``.
        style: ``"bahdanau"`` (attend before the RNN step) or ``"luong"`` (after, input feeding).
        attention_units, window: additive/concat units; local attention's half-width.
        teacher_forcing_ratio: below 1, training feeds the model's own greedy prediction otherwise.
    """

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
        if self.src_vocab <= 0 or self.tgt_vocab <= 0:
            raise ValueError(f"src_vocab and tgt_vocab must be > 0, got {self.src_vocab}, "
                             f"{self.tgt_vocab}")
        if self.cell not in RNN_CELLS:
            raise ValueError(f"cell must be one of {RNN_CELLS}, got {self.cell!r}")
        if self.style not in DECODER_STYLES:
            raise ValueError(f"style must be one of {DECODER_STYLES}, got {self.style!r}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, "
                             f"got {self.attention!r}")
        if not 0.0 <= self.teacher_forcing_ratio <= 1.0:
            raise ValueError(f"teacher_forcing_ratio must lie in [0, 1], "
                             f"got {self.teacher_forcing_ratio}")
        if self.layers < 1 or self.hidden < 1 or self.emb_dim < 1:
            raise ValueError("layers, hidden and emb_dim must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TransformerConfig(SpecialIds):
    """A pre-norm Transformer encoder-decoder (Vaswani et al. 2017).

    Args:
        src_vocab, tgt_vocab, d_model, heads, layers, ff_dim: sizes (``layers`` each side).
        dropout: on embeddings, attention outputs and feed-forward.
        max_len, positional: the positional encoding's length and kind (``"sinusoidal"`` or
            ``"learned"``).
        tie_embeddings: share the target embedding with the output projection.
        share_embeddings: one table for source and target (needs ``src_vocab == tgt_vocab``).
    """

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
        if self.src_vocab <= 0 or self.tgt_vocab <= 0:
            raise ValueError(f"src_vocab and tgt_vocab must be > 0, got {self.src_vocab}, "
                             f"{self.tgt_vocab}")
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', "
                             f"got {self.positional!r}")
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"share_embeddings needs one joint vocabulary, got src_vocab "
                             f"{self.src_vocab} != tgt_vocab {self.tgt_vocab}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


CONFIG_CLASSES = {"rnn": RNNSeq2SeqConfig, "transformer": TransformerConfig}


def config_from_dict(data: dict[str, Any]) -> RNNSeq2SeqConfig | TransformerConfig:
    """Rebuild a config from `to_dict` output; unknown keys raise ValueError (naming them)."""
    arch = data.get("arch", "rnn")
    if arch not in CONFIG_CLASSES:
        raise ValueError(f"unknown model arch {arch!r}; expected one of {sorted(CONFIG_CLASSES)}")
    cls = CONFIG_CLASSES[arch]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {arch} model config keys: {unknown}")
    return cls(**data)
