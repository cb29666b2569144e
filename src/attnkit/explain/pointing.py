"""The pointing game (Zhang et al. 2016) for caption explanations: does the strongest cell of a
word's map fall on the ducks the word names?

On the synthetic scenes, a method's map of a colour or count word (gold caption fed) *hits*
when its largest cell is at least half inside the named ducks' boxes
(`attnkit.explain.grounding`). The floor is chance: the share of cells at least half inside."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnkit.data.caption_data import CaptionData, CaptionDataset, box_coverage, collate
from attnkit.data.vocab import Vocab
from attnkit.explain.captions import word_maps
from attnkit.explain.grounding import word_group
from attnkit.models.captioner import Captioner

RANDOM = "random"


def pointing_game(model: Captioner, data: CaptionData, vocab: Vocab, *,
                  methods: Sequence[str] = ("attention", "grad-input", "integrated-gradients"),
                  batch_size: int = 32) -> dict:
    """Hit rates of each method's maps on the named ducks: ``{method: {"hits", "words",
    "accuracy"}}`` with ``"random"`` (expected hits); ``{}`` without ground-truth scenes."""
    if data.scenes is None:
        return {}
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    side, size = model.config.feature_size, model.config.image_size
    hits = {m: 0.0 for m in [*methods, RANDOM]}
    words = 0
    try:
        for start in range(0, len(ds), batch_size):
            idx = range(start, min(start + batch_size, len(ds)))
            batch = collate([ds[i] for i in idx], vocab.pad_id)
            images, tgt_in = batch["images"].to(device), batch["tgt_in"].to(device)
            tgt_out = batch["tgt_out"].to(device)
            maps = {m: word_maps(model, images, tgt_in, tgt_out, m).cpu().numpy()
                    for m in methods}
            for b, i in enumerate(idx):
                scene = data.scenes[i]
                for pos, boxes in scene.word_boxes.items():
                    if word_group(scene.caption[pos]) is None or pos >= tgt_in.shape[1]:
                        continue
                    cov = box_coverage(boxes, size, side)
                    words += 1
                    hits[RANDOM] += float((cov >= 0.5).mean())
                    for m in methods:
                        cell = np.unravel_index(int(maps[m][b, pos].argmax()), cov.shape)
                        hits[m] += float(cov[cell] >= 0.5)
    finally:
        model.train(was)
    return {m: {"hits": round(h, 2), "words": words, "accuracy": h / max(words, 1)}
            for m, h in hits.items()}


def pointing_table(table: dict) -> str:
    """`pointing_game` as a few text lines (accuracy per method, chance last)."""
    lines = ["pointing game (the strongest cell of a colour or count word's map on the ducks "
             "it names)", f"{'method':24}{'words':>7}{'accuracy':>10}"]
    for name, row in table.items():
        lines.append(f"{name:24}{row['words']:>7}{row['accuracy']:>10.3f}")
    return "\n".join(lines)
