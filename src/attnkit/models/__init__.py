"""Translation networks built from attnkit attention and positional encodings.

``build_model(config)`` turns a config (or its JSON dict) back into a network; every model has
the step API of `attnkit.models.seq2seq` that `attnkit.decoding` relies on.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from attnkit.models.config import RNNSeq2SeqConfig, TransformerConfig, config_from_dict
from attnkit.models.losses import masked_cross_entropy
from attnkit.models.seq2seq import RNNSeq2Seq
from attnkit.models.transformer import TransformerSeq2Seq


def build_model(config: RNNSeq2SeqConfig | TransformerConfig | dict[str, Any]) -> nn.Module:
    """A fresh (untrained) model for ``config``, or for its ``to_dict()`` form."""
    if isinstance(config, dict):
        config = config_from_dict(config)
    if isinstance(config, TransformerConfig):
        return TransformerSeq2Seq(config)
    return RNNSeq2Seq(config)


__all__ = ["RNNSeq2Seq", "RNNSeq2SeqConfig", "TransformerConfig", "TransformerSeq2Seq",
           "build_model", "config_from_dict", "masked_cross_entropy"]
