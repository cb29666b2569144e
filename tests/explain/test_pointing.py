"""Caption explanations beside attention and the pointing game: attention's hits are the
grounding table's max-in, chance is its uniform max-in, and gradient x input maps match a
direct autograd computation."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.caption_data import CaptionDataset, collate, synthetic_split
from attnkit.data.vocab import Vocab
from attnkit.explain.captions import grounding, pointing_game, pointing_table, word_maps
from attnkit.models.captioner import Captioner, CaptionerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16}


def _model_and_data():
    data = synthetic_split(6, 7, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    torch.manual_seed(0)
    return Captioner(CaptionerConfig(vocab_size=len(vocab), **SMALL)).eval(), data, vocab


def test_attention_and_chance_are_the_grounding_figures():
    model, data, vocab = _model_and_data()
    g = grounding(model, data, vocab)
    table = pointing_game(model, data, vocab, methods=("attention",), batch_size=4)
    assert table["attention"]["words"] == g["grounded_words"]
    assert table["attention"]["accuracy"] == pytest.approx(g["grounding_max_inside"])
    assert table["random"]["accuracy"] == pytest.approx(g["uniform_max_inside"])
    assert "random" in pointing_table(table)


def test_gradient_maps_match_autograd():
    pytest.importorskip("captum")
    model, data, vocab = _model_and_data()
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    batch = collate([ds[0], ds[1]], vocab.pad_id)
    images, tgt_in, tgt_out = batch["images"], batch["tgt_in"], batch["tgt_out"]
    maps = word_maps(model, images, tgt_in, tgt_out, "grad-input")
    assert maps.shape == (2, tgt_in.shape[1], 8, 8)
    assert torch.allclose(maps.flatten(2).sum(-1), torch.ones(2, tgt_in.shape[1]), atol=1e-5)
    # Word 2 of image 1, by hand: d log p / d features, times the features, summed over
    # channels, its magnitude normalised.
    feats = model.encoder(images[1:2]).detach().requires_grad_(True)
    state = model.encode(None, features=feats)
    for t in range(3):
        logits, state, _ = model.word_step(tgt_in[1:2, t], state)
    torch.log_softmax(logits, -1)[0, tgt_out[1, 2]].backward()
    cells = (feats.grad * feats).sum(1)[0].abs()
    torch.testing.assert_close(maps[1, 2], cells / cells.sum(), atol=1e-5, rtol=1e-4)
    ig = word_maps(model, images[:1], tgt_in[:1], tgt_out[:1], "integrated-gradients", steps=8)
    assert torch.isfinite(ig).all() and ig.shape == (1, tgt_in.shape[1], 8, 8)
