"""Captioning data: splits (synthetic and real), tokenizing, batches, attention targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attnkit.data.caption_data import (
    CaptionData,
    CaptionDataset,
    box_coverage,
    collate,
    load_splits,
    parse_spec,
    synthetic_split,
    tokenize,
)
from attnkit.data.vocab import Vocab
from attnkit.errors import DataError, UsageError


def test_tokenize_lowercases_and_drops_punctuation():
    assert tokenize("A Dog's ball, running 2 times!") == ["a", "dog's", "ball", "running", "2",
                                                         "times"]
    assert tokenize("...") == []


def test_box_coverage_matches_pixel_count():
    boxes = [(3, 5, 20, 11), (10, 8, 30, 31)]  # overlapping: the union counts once
    cov = box_coverage(boxes, 32, 4)
    inside = np.zeros((32, 32), bool)
    for y in range(32):
        for x in range(32):
            inside[y, x] = any(x0 <= x < x1 and y0 <= y < y1 for x0, y0, x1, y1 in boxes)
    for i in range(4):
        for j in range(4):
            assert cov[i, j] == pytest.approx(inside[8 * i:8 * i + 8, 8 * j:8 * j + 8].mean())


def test_collate_shifts_and_pads():
    items = [(torch.zeros(3, 4, 4, dtype=torch.uint8), [1, 5, 6, 2]),
             (torch.ones(3, 4, 4, dtype=torch.uint8), [1, 7, 2])]
    batch = collate(items, pad_id=0)
    # Row 1 feeds its EOS at step 2, a padded step (lengths) the loss ignores.
    assert batch["tgt_in"].tolist() == [[1, 5, 6], [1, 7, 2]]
    assert batch["tgt_out"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch["lengths"].tolist() == [3, 2]


def test_synthetic_splits_come_from_three_seeds_per_seed():
    splits = load_splits("synthetic", 2, num_train=4, num_valid=3, num_test=2, image_size=32)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [4, 3, 2]
    assert splits["train"].images.shape == (4, 3, 32, 32)
    assert splits["train"].images.dtype == torch.uint8
    for k, name in enumerate(("train", "valid", "test")):
        same = synthetic_split(len(splits[name]), 3 * 2 + k, 32)
        assert torch.equal(same.images, splits[name].images) and same.refs == splits[name].refs
    only_test = load_splits("synthetic", 2, num_train=4, num_valid=3, num_test=2, image_size=32,
                            names=("test",))
    assert list(only_test) == ["test"]


def test_bad_data_spec():
    with pytest.raises(DataError, match="synthetic"):
        load_splits("imagenet", 0, num_train=1, num_valid=1, num_test=1, image_size=64)
    with pytest.raises(DataError, match="coco:JSON:IMAGE_DIR"):
        parse_spec("flickr:only-one-part")
    assert parse_spec("coco:a/b.json:imgs")[0] == "coco"


def _flickr(tmp_path, n: int = 10) -> str:
    images = tmp_path / "imgs"
    images.mkdir()
    lines = []
    for i in range(n):
        Image.fromarray(np.full((40, 30, 3), 20 * i, np.uint8)).save(images / f"{i}.jpg")
        lines += [f"{i}.jpg#0\tA Dog, running {i}.", f"{i}.jpg#1\tthe dog's ball"]
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(lines) + "\n")
    return f"flickr:{tokens}:{images}"


def test_flickr_spec_splits_images_and_tokenizes(tmp_path):
    spec = _flickr(tmp_path)
    splits = load_splits(spec, 0, num_train=0, num_valid=0, num_test=0, image_size=32,
                         valid_fraction=0.2)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [6, 2, 2]
    assert splits["train"].images.shape == (6, 3, 32, 32) and splits["train"].scenes is None
    assert splits["valid"].refs[0][1] == ["the", "dog's", "ball"]
    assert splits["valid"].refs[0][0][:3] == ["a", "dog", "running"]
    # The split is a function of the seed: the same images, whichever splits are read.
    test = load_splits(spec, 0, num_train=0, num_valid=0, num_test=0, image_size=32,
                       valid_fraction=0.2, names=("test",))["test"]
    assert torch.equal(test.images, splits["test"].images) and test.refs == splits["test"].refs
    everything = load_splits(spec, 0, num_train=0, num_valid=0, num_test=0, image_size=32,
                             names=("all",))["all"]
    assert len(everything) == 10


def test_real_data_needs_three_images(tmp_path):
    with pytest.raises(DataError, match="at least 3"):
        load_splits(_flickr(tmp_path, 2), 0, num_train=0, num_valid=0, num_test=0,
                    image_size=32)


def test_attention_targets_line_up_with_the_words():
    data = synthetic_split(6, 2, 64)
    vocab = Vocab.build(r[0] for r in data.refs)
    ds = CaptionDataset(data, vocab, 20, map_side=8)
    batch = collate([ds[i] for i in range(6)], vocab.pad_id)
    assert batch["maps"].shape == (*batch["tgt_out"].shape, 8, 8)
    for b, scene in enumerate(data.scenes):
        for t in range(batch["maps"].shape[1]):
            row = batch["maps"][b, t].numpy()
            if t in scene.word_boxes:  # row t is the target of the word at tgt_out[t]
                assert vocab.decode([int(batch["tgt_out"][b, t])]) == [scene.caption[t]]
                np.testing.assert_allclose(row, box_coverage(scene.word_boxes[t], 64, 8))
            else:
                assert not row.any()
    with pytest.raises(UsageError, match="synthetic"):
        CaptionDataset(CaptionData(data.images, data.refs), vocab, 20, map_side=8)
