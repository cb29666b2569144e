"""Caption grounding: the figures against independent pixel counts, the uniform baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.data.caption_data import CaptionData, synthetic_split
from attnkit.data.vocab import Vocab
from attnkit.explain.captions import (
    GROUNDED_WORDS,
    grounding,
    grounding_table,
    word_group,
)
from attnkit.models.captioner import Captioner, CaptionerConfig

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16}


def test_word_groups():
    assert [word_group(w) for w in ("blue", "a", "three", "duck", "facing")] == [
        "colour", "count", "count", None, None]


def test_uniform_attention_scores_the_uniform_baseline():
    data = synthetic_split(5, 7, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    torch.manual_seed(0)
    model = Captioner(CaptionerConfig(vocab_size=len(vocab), **SMALL))
    with torch.no_grad():
        model.attention.score.v.zero_()  # constant scores -> uniform weights everywhere
    g = grounding(model, data, vocab)
    for p in ("", "colour_", "count_"):
        assert g[f"grounding_{p}mass"] == pytest.approx(g[f"uniform_{p}mass"])
    expected = sum(1 for s in data.scenes for p in s.word_boxes
                   if s.caption[p] in GROUNDED_WORDS)
    assert g["grounded_words"] == expected == g["colour_words"] + g["count_words"]
    assert g["colour_words"] > 0 and g["count_words"] > 0
    assert 0 < g["uniform_mass"] < 0.5
    assert model.training  # put back as it was
    assert grounding(model, CaptionData(data.images, data.refs), vocab) == {}  # no boxes


class OneCellModel(torch.nn.Module):
    """Stands in for a captioner: word ``t`` puts all attention on cell ``CELLS[t]``."""

    CELLS = [(1, 2), (3, 3), (0, 0), (7, 1), (2, 5), (4, 4), (6, 6), (5, 0), (2, 2), (1, 7)]

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, images, tgt_in):
        b, t = tgt_in.shape
        alphas = torch.zeros(b, t, 8, 8)
        for k in range(t):
            alphas[:, k][:, self.CELLS[k][0], self.CELLS[k][1]] = 1.0
        return torch.zeros(b, t, self.config.vocab_size), alphas


def test_grounding_splits_words_and_aligns_maps_with_pixel_counts():
    data = synthetic_split(12, 3, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    model = OneCellModel(CaptionerConfig(vocab_size=len(vocab), **SMALL))
    g = grounding(model, data, vocab)
    # Independent: per graded word, the share of the 8x8 pixel block of the cell attended when
    # predicting word t (row t of the maps) that lies inside any named box, by pixel tests.
    got = {"colour": [], "count": []}
    per_word: dict = {}  # (kind, 1-based position, group) -> masses
    for s in data.scenes:
        for pos, boxes in s.word_boxes.items():
            word = s.caption[pos]
            group = "colour" if word in ("red", "blue", "green", "yellow") else (
                "count" if word in ("a", "one", "two", "three", "four", "five") else None)
            if group is None:
                continue
            r, c = OneCellModel.CELLS[pos]
            inside = [any(x0 <= x < x1 and y0 <= y < y1 for x0, y0, x1, y1 in boxes)
                      for y in range(8 * r, 8 * r + 8) for x in range(8 * c, 8 * c + 8)]
            got[group].append(np.mean(inside))
            per_word.setdefault((s.kind, pos + 1, group), []).append(np.mean(inside))
    for group, vals in got.items():
        assert g[f"{group}_words"] == len(vals) > 0
        assert g[f"grounding_{group}_mass"] == pytest.approx(np.mean(vals))
        assert g[f"grounding_{group}_max_inside"] == pytest.approx(
            np.mean([v >= 0.5 for v in vals]))
    both = got["colour"] + got["count"]
    assert g["grounding_mass"] == pytest.approx(np.mean(both))
    rows = {(r["kind"], r["position"], r["group"]): r for r in g["grounding_by_word"]}
    assert set(rows) == set(per_word) and len(rows) > 3
    for key, vals in per_word.items():
        assert rows[key]["words"] == len(vals)
        assert rows[key]["mass"] == pytest.approx(np.mean(vals))
        assert rows[key]["max_inside"] == pytest.approx(np.mean([v >= 0.5 for v in vals]))
    table = grounding_table(g)
    assert "colour words" in table and "count words" in table and "overall" in table
    assert f"{g['grounding_count_mass']:.3f}" in table
    kind, pos, group = next(iter(sorted(rows)))
    assert f"{kind} {pos} ({group})" in table
