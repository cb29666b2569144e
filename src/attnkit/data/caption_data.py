"""Captioning data: images + tokenized reference captions, their splits, and the dataset and
collate function the trainer batches them with.

``"synthetic"`` draws rubber-duck scenes (`attnkit.data.scenes`), seeds ``3 * seed + k``
for train/valid/test; ``"flickr:TOKEN_FILE:IMAGE_DIR"`` or ``"coco:JSON:IMAGE_DIR"`` read
real data (`attnkit.data.caption_files`), split by ``valid_fraction`` in a seeded order."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from attnkit.data.batching import pad_ids
from attnkit.data.caption_files import load_image, read_coco_captions, read_flickr_tokens
from attnkit.data.scenes import Box, Scene, make_scenes
from attnkit.data.vocab import Vocab
from attnkit.errors import DataError, UsageError

SPLITS = ("train", "valid", "test")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_READERS = {"flickr": read_flickr_tokens, "coco": read_coco_captions}


def tokenize(text: str) -> list[str]:
    """Lower-cased words of a real caption, punctuation dropped (``"A Dog's ball."`` ->
    ``["a", "dog's", "ball"]``)."""
    return _WORD.findall(text.lower())


@dataclass
class CaptionData:
    """Images uint8 ``[N, 3, S, S]``, per image its reference captions as word lists (the first is
    trained on), and the synthetic scenes (None for real data)."""

    images: Tensor
    refs: list[list[list[str]]]
    scenes: list[Scene] | None = None

    def __len__(self) -> int:
        return len(self.refs)


def to_chw(images: Sequence[np.ndarray]) -> Tensor:
    """uint8 ``[H, W, 3]`` arrays -> one uint8 tensor ``[N, 3, H, W]``."""
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()


def synthetic_split(n: int, seed: int, size: int) -> CaptionData:
    """``n`` duck scenes drawn from ``seed`` at ``size`` pixels (one reference each)."""
    scenes = make_scenes(n, seed, size)
    return CaptionData(to_chw([s.image for s in scenes]), [[s.caption] for s in scenes], scenes)


def parse_spec(spec: str) -> tuple[str, Path, Path]:
    """``"flickr:TOKEN_FILE:IMAGE_DIR"`` / ``"coco:JSON:IMAGE_DIR"`` -> ``(kind, captions,
    image_dir)``; DataError for any other form."""
    kind, _, rest = spec.partition(":")
    captions, _, image_dir = rest.rpartition(":")
    if kind not in _READERS or not captions or not image_dir:
        raise DataError("data must be 'synthetic', 'flickr:TOKEN_FILE:IMAGE_DIR' or "
                        f"'coco:JSON:IMAGE_DIR', got {spec!r}")
    return kind, Path(captions), Path(image_dir)


def real_splits(spec: str, size: int, valid_fraction: float, seed: int,
                names: Sequence[str] = SPLITS,
                log: Callable[[str], None] | None = None) -> dict[str, CaptionData]:
    """The ``names`` splits of a real data set (others' images are not read): shuffled by ``seed``,
    ``round(valid_fraction * N)`` (at least one) valid, as many test, the rest train; ``"all"``
    is every image. Skipped captions are reported to ``log``. DataError: a bad spec, unreadable
    files, or fewer than 3 captioned images."""
    kind, captions, image_dir = parse_spec(spec)
    read = _READERS[kind](captions, image_dir, missing_images="skip")
    if read.drops.total and log is not None:
        log(read.drops.format(str(captions)))
    items = read.items
    if len(items) < 3:
        raise DataError(f"need at least 3 captioned images, found {len(items)}", path=str(captions))
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_hold = max(1, round(valid_fraction * len(items)))
    parts = {"valid": order[:n_hold], "test": order[n_hold:2 * n_hold],
             "train": order[2 * n_hold:], "all": list(range(len(items)))}
    out = {}
    for name in names:
        idx = parts[name]
        imgs = [load_image(items[i].image, size) for i in idx]
        refs = [[tokenize(c) for c in items[i].captions] for i in idx]
        out[name] = CaptionData(to_chw(imgs) if imgs else torch.zeros(0, 3, size, size,
                                                                      dtype=torch.uint8), refs)
    return out


def load_splits(data: str, seed: int, *, num_train: int, num_valid: int, num_test: int,
                image_size: int, valid_fraction: float = 0.05,
                names: Sequence[str] = SPLITS,
                log: Callable[[str], None] | None = None) -> dict[str, CaptionData]:
    """The ``names`` splits (default train, valid, test) of ``data`` (see the module docs);
    ``num_*`` size the synthetic splits, ``valid_fraction`` the real ones; ``log`` receives
    the report of skipped captions (real data)."""
    if data != "synthetic":
        return real_splits(data, image_size, valid_fraction, seed, names, log)
    sizes = {"train": num_train, "valid": num_valid, "test": num_test}
    return {name: synthetic_split(sizes[name], 3 * seed + SPLITS.index(name), image_size)
            for name in names}


def box_coverage(boxes: Sequence[Box], image_size: int, side: int) -> np.ndarray:
    """Share of each feature cell's pixels inside the union of ``boxes``: ``[side, side]``, so
    ``sum(alpha * coverage)`` is the attention mass inside the boxes."""
    mask = np.zeros((image_size, image_size), np.float64)
    for x0, y0, x1, y1 in boxes:
        mask[y0:y1, x0:x1] = 1.0
    cell = image_size // side
    return mask.reshape(side, cell, side, cell).mean(axis=(1, 3))


class CaptionDataset(torch.utils.data.Dataset):
    """Item ``i`` = ``(image uint8 [3, S, S], ids [BOS, w1 .. wn, EOS])`` of the first reference.

    With ``map_side`` (synthetic scenes only; else UsageError) a third part ``maps float32
    [n + 1, side, side]``: row ``t`` is the `box_coverage` of the ducks word ``t`` names, the
    target of supervised attention."""

    def __init__(self, data: CaptionData, vocab: Vocab, max_len: int, map_side: int | None = None):
        self.images = data.images
        self.ids = [vocab.encode(r[0][:max_len], add_bos=True, add_eos=True) for r in data.refs]
        self.maps = None
        if map_side is not None:
            if data.scenes is None:
                raise UsageError("attention targets need synthetic scenes (word boxes)")
            size = int(data.images.shape[-1])
            self.maps = [self._targets(ids, scene, size, map_side)
                         for ids, scene in zip(self.ids, data.scenes, strict=True)]

    @staticmethod
    def _targets(ids: list[int], scene: Scene, size: int, side: int) -> Tensor:
        maps = np.zeros((len(ids) - 1, side, side), np.float32)
        for pos, boxes in scene.word_boxes.items():
            if pos < len(ids) - 2:  # words cut by max_len have no row
                maps[pos] = box_coverage(boxes, size, side)
        return torch.from_numpy(maps)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return (self.images[i], self.ids[i], *([] if self.maps is None else [self.maps[i]]))


def collate(items, pad_id: int = 0) -> dict[str, Tensor]:
    """-> ``images [B, 3, S, S]``, ``tgt_in``/``tgt_out [B, T]`` (padded), ``lengths [B]``
    (+ ``maps [B, T, side, side]``, zero-padded, when the items carry attention targets)."""
    images, ids, *maps = zip(*items, strict=True)
    tgt = pad_ids(ids, pad_id)
    batch = {"images": torch.stack(images), "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:],
             "lengths": torch.tensor([len(s) - 1 for s in ids])}
    if maps:
        batch["maps"] = pad_sequence(list(maps[0]), batch_first=True)
    return batch
