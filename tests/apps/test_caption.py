"""The caption app: metrics against independent computations, a tiny run end to end, bad images."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
import torch
from PIL import Image

from attnkit.apps import caption as app
from attnkit.data.scenes import make_scenes
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError
from attnkit.models.captioner import Captioner, CaptionerConfig

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16}




@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("caption") / "run"
    result = app.train(out, num_train=24, num_valid=6, num_test=6, epochs=1, batch_size=8,
                       device="cpu", progress=False, model_overrides=SMALL)
    assert result.stop_reason == "completed"
    return out


def test_box_coverage_matches_pixel_count():
    boxes = [(3, 5, 20, 11), (10, 8, 30, 31)]  # overlapping: the union counts once
    cov = app.box_coverage(boxes, 32, 4)
    inside = np.zeros((32, 32), bool)
    for y in range(32):
        for x in range(32):
            inside[y, x] = any(x0 <= x < x1 and y0 <= y < y1 for x0, y0, x1, y1 in boxes)
    for i in range(4):
        for j in range(4):
            assert cov[i, j] == pytest.approx(inside[8 * i:8 * i + 8, 8 * j:8 * j + 8].mean())


def test_uniform_attention_scores_the_uniform_baseline():
    data = app._synthetic(5, 7, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    torch.manual_seed(0)
    model = Captioner(CaptionerConfig(vocab_size=len(vocab), **SMALL))
    with torch.no_grad():
        model.attention.score.v.zero_()  # constant scores -> uniform weights everywhere
    g = app.grounding(model, data, vocab)
    for p in ("", "colour_", "count_"):
        assert g[f"grounding_{p}mass"] == pytest.approx(g[f"uniform_{p}mass"])
    expected = sum(1 for s in data.scenes for p in s.word_boxes
                   if s.caption[p] in app.GROUNDED_WORDS)
    assert g["grounded_words"] == expected == g["colour_words"] + g["count_words"]
    assert g["colour_words"] > 0 and g["count_words"] > 0
    assert 0 < g["uniform_mass"] < 0.5


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
    data = app._synthetic(12, 3, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    model = OneCellModel(CaptionerConfig(vocab_size=len(vocab), **SMALL))
    g = app.grounding(model, data, vocab)
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
    table = app.grounding_table(g)
    assert "colour words" in table and "count words" in table and "overall" in table
    assert f"{g['grounding_count_mass']:.3f}" in table
    kind, pos, group = next(iter(sorted(rows)))
    assert f"{kind} {pos} ({group})" in table


def test_bleu_is_a_fraction():
    refs = [[["a", "blue", "duck", "among", "yellow", "ducks"]],
            [["two", "red", "ducks", "and", "one", "green", "duck"]]]
    assert app.bleu4([r[0] for r in refs], refs) == pytest.approx(1.0)
    assert 0.0 <= app.bleu4([["a", "duck"], ["two", "ducks"]], refs) < 0.5


def test_collate_shifts_and_pads():
    items = [(torch.zeros(3, 4, 4, dtype=torch.uint8), [1, 5, 6, 2]),
             (torch.ones(3, 4, 4, dtype=torch.uint8), [1, 7, 2])]
    batch = app.collate(items, pad_id=0)
    # Row 1 feeds its EOS at step 2, a padded step (lengths) the loss ignores.
    assert batch["tgt_in"].tolist() == [[1, 5, 6], [1, 7, 2]]
    assert batch["tgt_out"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch["lengths"].tolist() == [3, 2]


def test_run_folder_and_evaluate(run):
    for name in ("config.json", "vocab.json", "model.json", "metrics.jsonl",
                 "best.safetensors", "last"):
        assert (run / name).exists(), name
    assert json.loads((run / "config.json").read_text())["app"] == "caption"
    metrics = app.evaluate(run)
    assert metrics["examples"] == 6 and 0 <= metrics["accuracy"] <= 1
    assert 0 <= metrics["bleu4"] <= 1 and metrics["grounded_words"] > 0
    assert 0 < metrics["uniform_mass"] < 1 and metrics["attention_supervision"] == 0.0
    model_cfg = json.loads((run / "model.json").read_text())
    assert {k: model_cfg[k] for k in app.MODEL_DEFAULTS} == app.MODEL_DEFAULTS


def test_validation_loss_is_the_per_token_cross_entropy_and_breaks_ties(run):
    model, vocab, meta = app.load_run(run)
    assert meta["train"]["select_metric"] == "accuracy"
    assert meta["train"]["select_tiebreak"] == "loss"
    evals = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()
             if '"eval"' in s]
    assert evals and all("val_loss" in e for e in evals)
    data = app._synthetic(5, 9, 64)
    # Independently: one image at a time, summed over its words + EOS, over all such tokens.
    total, tokens = 0.0, 0
    for image, (words,) in zip(data.images, data.refs, strict=True):
        ids = vocab.encode(words[:model.config.max_caption_len], add_bos=True, add_eos=True)
        logits, _ = model(image[None], torch.tensor([ids[:-1]]))
        total += float(torch.nn.functional.cross_entropy(logits[0], torch.tensor(ids[1:]),
                                                         reduction="sum"))
        tokens += len(ids) - 1
    # Batches of 2 with captions of different lengths: padding must not count.
    assert app.validation_loss(model, data, vocab, batch_size=2) == pytest.approx(
        total / tokens, rel=1e-5)


def test_greedy_equals_beam_one_with_maps(run):
    model, _, _ = app.load_run(run)
    imgs = app._synthetic(3, 11, 64).images
    greedy = app.decode_captions(model, imgs, beam_size=1)
    beam = app.decode_captions(model, imgs, beam_size=3)
    for (ids, maps), (bids, bmaps) in zip(greedy, beam, strict=True):
        assert maps.shape == (len(ids), 8, 8) and bmaps.shape == (len(bids), 8, 8)
        np.testing.assert_allclose(maps.sum((1, 2)), 1.0, rtol=1e-5)


def test_predict_writes_figure_and_html(run, tmp_path):
    scene = make_scenes(1, 99)[0]
    path = tmp_path / "ducks.png"
    Image.fromarray(scene.image).save(path)
    pred = app.predict(run, path, out=tmp_path / "fig.png", html=tmp_path / "r.html")
    assert pred.maps.shape == (len(pred.words), 8, 8)
    with Image.open(tmp_path / "fig.png") as im:
        assert im.format == "PNG" and im.size[0] > 100
    page = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in page and html.escape(pred.caption) in page


@pytest.mark.parametrize("mode", ["L", "RGBA", "big"])
def test_predict_converts_odd_images(run, tmp_path, mode):
    scene = make_scenes(1, 3)[0]
    im = Image.fromarray(scene.image)
    im = im.resize((900, 700)) if mode == "big" else im.convert(mode)
    path = tmp_path / f"odd_{mode}.png"
    im.save(path)
    pred = app.predict(run, path)
    assert pred.image.shape == (256, 256, 3) and pred.maps.shape[1:] == (8, 8)


def test_predict_bad_inputs_name_the_file(run, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    with pytest.raises(DataError, match="notes.png"):
        app.predict(run, bad)
    with pytest.raises(DataError, match="missing.jpg"):
        app.predict(run, tmp_path / "missing.jpg")
    with pytest.raises(CheckpointError, match="not a caption run"):
        app.predict(tmp_path, bad)
    with pytest.raises(ValueError, match=r"uint8 \[H, W, 3\]"):
        app.predict(run, np.zeros((64, 64), np.uint8))


def test_bad_data_spec():
    with pytest.raises(DataError, match="synthetic"):
        app.load_splits("imagenet", 0, num_train=1, num_valid=1, num_test=1, image_size=64)


def test_flickr_spec_splits_images_and_tokenizes(tmp_path):
    images = tmp_path / "imgs"
    images.mkdir()
    lines = []
    for i in range(10):
        Image.fromarray(np.full((40, 30, 3), 20 * i, np.uint8)).save(images / f"{i}.jpg")
        lines += [f"{i}.jpg#0\tA Dog, running {i}.", f"{i}.jpg#1\tthe dog's ball"]
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(lines) + "\n")
    splits = app.load_splits(f"flickr:{tokens}:{images}", 0, num_train=0, num_valid=0,
                             num_test=0, image_size=32, valid_fraction=0.2)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [6, 2, 2]
    assert splits["train"].images.shape == (6, 3, 32, 32) and splits["train"].scenes is None
    assert splits["valid"].refs[0][1] == ["the", "dog's", "ball"]
    assert splits["valid"].refs[0][0][:3] == ["a", "dog", "running"]


def test_attention_targets_line_up_with_the_words():
    data = app._synthetic(6, 2, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    ds = app.CaptionDataset(data, vocab, 20, map_side=8)
    batch = app.collate([ds[i] for i in range(6)], vocab.pad_id)
    assert batch["maps"].shape == (*batch["tgt_out"].shape, 8, 8)
    for b, scene in enumerate(data.scenes):
        for t in range(batch["maps"].shape[1]):
            row = batch["maps"][b, t].numpy()
            if t in scene.word_boxes:  # row t is the target of the word at tgt_out[t]
                assert vocab.decode([int(batch["tgt_out"][b, t])]) == [scene.caption[t]]
                np.testing.assert_allclose(row, app.box_coverage(scene.word_boxes[t], 64, 8))
            else:
                assert not row.any()
    with pytest.raises(ValueError, match="synthetic"):
        app.CaptionDataset(app.CaptionData(data.images, data.refs), vocab, 20, map_side=8)


def test_supervised_run_records_its_weight(tmp_path):
    out = tmp_path / "sup"
    app.train(out, num_train=16, num_valid=4, num_test=4, epochs=1, batch_size=8,
              device="cpu", progress=False, model_overrides=SMALL, attention_supervision=1.0)
    assert json.loads((out / "config.json").read_text())["attention_supervision"] == 1.0
    assert app.evaluate(out)["attention_supervision"] == 1.0  # eval reports how it was trained
    with pytest.raises(ValueError, match="attention_supervision"):
        app.train(tmp_path / "bad", attention_supervision=-1.0)


def test_same_seed_same_weights(tmp_path):
    from safetensors.torch import load_file

    weights = []
    for name in ("a", "b"):
        torch.rand(7)  # move the global RNG: the run must not depend on it
        app.train(tmp_path / name, num_train=8, num_valid=2, num_test=2, epochs=1,
                  batch_size=8, device="cpu", progress=False, model_overrides=SMALL)
        weights.append(load_file(tmp_path / name / "best.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    for key, value in weights[0].items():
        torch.testing.assert_close(value, weights[1][key], rtol=0, atol=0, msg=key)
