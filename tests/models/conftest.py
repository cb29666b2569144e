"""Fixtures shared by the model tests."""

import pytest
import torch

from attnkit.models import TransformerConfig, TransformerSeq2Seq


@pytest.fixture
def tiny_transformer():
    """``tiny_transformer(**config)``: a seeded 2-layer, 4-head Transformer over a 12-token
    vocabulary (d_model 32, no dropout), in eval mode."""
    def make(**kw) -> TransformerSeq2Seq:
        torch.manual_seed(0)
        cfg = TransformerConfig(**{"src_vocab": 12, "tgt_vocab": 12, "d_model": 32, "heads": 4,
                                   "layers": 2, "ff_dim": 64, "dropout": 0.0, **kw})
        return TransformerSeq2Seq(cfg).eval()
    return make
