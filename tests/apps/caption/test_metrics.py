"""Caption metrics: BLEU through the shared wrapper, the validation loss against an independent
per-image computation, greedy vs beam decoding with maps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.apps.caption.metrics import (
    bleu4,
    caption_metrics,
    decode_captions,
    validation_loss,
)
from attnkit.bleu import bleu_chrf
from attnkit.data.caption_data import synthetic_split
from attnkit.data.vocab import Vocab
from attnkit.models.captioner import Captioner, CaptionerConfig

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16}


@pytest.fixture(scope="module")
def setup():
    """A small untrained captioner (32 px, 4x4 map) with the vocabulary of a few scenes."""
    data = synthetic_split(5, 9, 32)
    vocab = Vocab.build(r[0] for r in data.refs)
    torch.manual_seed(0)
    model = Captioner(CaptionerConfig(vocab_size=len(vocab), image_size=32, feature_size=4,
                                      max_caption_len=9, **SMALL)).eval()
    return model, vocab, data


def test_bleu_is_a_fraction_from_the_shared_wrapper():
    refs = [[["a", "blue", "duck", "among", "yellow", "ducks"]],
            [["two", "red", "ducks", "and", "one", "green", "duck"]]]
    assert bleu4([r[0] for r in refs], refs) == pytest.approx(1.0)
    assert 0.0 <= bleu4([["a", "duck"], ["two", "ducks"]], refs) < 0.5
    # Images with fewer references than others: the shared wrapper's None-padded streams.
    hyps = [["a", "dog", "runs"], ["the", "cat", "sits", "on", "a", "mat"]]
    uneven = [[["a", "dog", "runs", "fast"], ["the", "dog", "runs"]],
              [["the", "cat", "sits", "on", "the", "mat"]]]
    expected = bleu_chrf([" ".join(h) for h in hyps],
                         [[" ".join(r) for r in rs] for rs in uneven])["bleu"] / 100
    assert bleu4(hyps, uneven) == pytest.approx(expected)
    assert bleu4([], []) == 0.0


def test_validation_loss_is_the_per_token_cross_entropy(setup):
    model, vocab, data = setup
    # Independently: one image at a time, summed over its words + EOS, over all such tokens.
    total, tokens = 0.0, 0
    with torch.no_grad():
        for image, (words,) in zip(data.images, data.refs, strict=True):
            ids = vocab.encode(words[:model.config.max_caption_len], add_bos=True, add_eos=True)
            logits, _ = model(image[None], torch.tensor([ids[:-1]]))
            total += float(torch.nn.functional.cross_entropy(
                logits[0], torch.tensor(ids[1:]), reduction="sum"))
            tokens += len(ids) - 1
    # Batches of 2 with captions of different lengths: padding must not count.
    assert validation_loss(model, data, vocab, batch_size=2) == pytest.approx(
        total / tokens, rel=1e-5)


def test_decoding_gives_one_map_per_word_in_any_chunking(setup):
    model, vocab, data = setup
    greedy = decode_captions(model, data.images, beam_size=1, batch_size=2)
    whole = decode_captions(model, data.images, beam_size=1)
    beam3 = decode_captions(model, data.images, beam_size=3)
    assert [ids for ids, _ in greedy] == [ids for ids, _ in whole]
    for (_, maps), (_, same) in zip(greedy, whole, strict=True):
        np.testing.assert_allclose(maps, same, atol=1e-6)
    for (ids, maps), (bids, bmaps) in zip(greedy, beam3, strict=True):
        assert maps.shape == (len(ids), 4, 4) and bmaps.shape == (len(bids), 4, 4)
        assert len(ids) <= model.config.max_caption_len + 1
        np.testing.assert_allclose(maps.sum((1, 2)), 1.0, rtol=1e-5)
    metrics = caption_metrics(model, data, vocab)
    hyps = [vocab.decode(ids, strip_specials=False) for ids, _ in greedy]
    assert metrics["examples"] == 5
    assert metrics["accuracy"] == sum(h == r[0] for h, r in zip(hyps, data.refs, strict=True)) / 5
    assert metrics["bleu4"] == pytest.approx(bleu4(hyps, data.refs))
