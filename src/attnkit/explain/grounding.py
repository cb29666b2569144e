"""Caption grounding: does a word's attention land on the ducks it names?

For the synthetic duck scenes (`attnkit.data.scenes`) every colour and count word comes with
the boxes of the ducks it names. `grounding` feeds the gold caption and scores the map used
to predict each such word against those boxes, beside uniform attention as the baseline;
`grounding_table` prints the figures."""

from __future__ import annotations

import numpy as np
import torch

from attnkit.data.caption_data import CaptionData, CaptionDataset, box_coverage, collate
from attnkit.data.scenes import COLOURS, NUMBERS
from attnkit.data.vocab import Vocab
from attnkit.models.captioner import Captioner

__all__ = ["GROUNDED_WORDS", "GROUPS", "box_coverage", "grounding", "grounding_table",
           "word_group"]

# Caption words whose attention must land on the objects they name (the grounding figure).
GROUNDED_WORDS = frozenset(COLOURS) | frozenset(NUMBERS.values()) | {"a"}
GROUPS = ("colour", "count")
# Summed per (template, position, group): mass, max inside, uniform mass, uniform max inside.
_FIGURES = ("mass", "max_inside", "uniform_mass", "uniform_max_inside")


def word_group(word: str) -> str | None:
    """``"colour"``, ``"count"`` (numbers and "a") or None for words not graded."""
    if word in COLOURS:
        return "colour"
    return "count" if word in GROUNDED_WORDS else None


@torch.no_grad()
def grounding(model: Captioner, data: CaptionData, vocab: Vocab,
              batch_size: int = 256) -> dict:
    """Where colour and count words look, with the gold caption fed (teacher forcing).

    For each such word: ``mass``, the attention inside the boxes of the ducks it names (a count
    word names every duck it counts), and ``max_inside``, whether the most attended cell is at
    least half inside them; uniform attention gives the baseline. Word ``t``'s map is the one
    that predicts it.

    Returns:
        Averages over words (``grounding_mass``, ``grounding_max_inside``, ``uniform_mass``,
        ``uniform_max_inside``, ``grounded_words``), the same per group (``grounding_colour_mass``
        ...), and ``grounding_by_word``, one row per template and word position; ``{}`` for
        data without scenes.
    """
    if data.scenes is None:
        return {}
    was = model.training
    model.eval()
    try:
        by_word = _sum_by_word(model, data, vocab, batch_size)
    finally:
        model.train(was)
    return _summarise(by_word)


def _sum_by_word(model: Captioner, data: CaptionData, vocab: Vocab,
                 batch_size: int) -> dict[tuple[str, int, str], np.ndarray]:
    """(template, position, group) -> summed ``[*_FIGURES, words]``; the group and overall
    figures are sums of these rows."""
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    side, size = model.config.feature_size, model.config.image_size
    by_word: dict[tuple[str, int, str], np.ndarray] = {}
    for start in range(0, len(ds), batch_size):
        idx = range(start, min(start + batch_size, len(ds)))
        batch = collate([ds[i] for i in idx], vocab.pad_id)
        _, alphas = model(batch["images"].to(device), batch["tgt_in"].to(device))
        alphas = alphas.float().cpu().numpy()  # [B, T, H, W]; row t predicted word t
        for b, i in enumerate(idx):
            scene = data.scenes[i]
            for pos, boxes in scene.word_boxes.items():
                group = word_group(scene.caption[pos])
                if group is None or pos >= alphas.shape[1]:
                    continue
                cov = box_coverage(boxes, size, side)
                alpha = alphas[b, pos]
                top = np.unravel_index(int(alpha.argmax()), alpha.shape)
                key = (scene.kind, pos, group)
                by_word[key] = by_word.get(key, np.zeros(5)) + [
                    float((alpha * cov).sum()), float(cov[top] >= 0.5), float(cov.mean()),
                    float((cov >= 0.5).mean()), 1.0]
    return by_word


def _summarise(by_word: dict[tuple[str, int, str], np.ndarray]) -> dict:
    keys = ("grounding_{}mass", "grounding_{}max_inside", "uniform_{}mass", "uniform_{}max_inside")
    out: dict = {}
    for prefix, groups in [("", GROUPS)] + [(f"{g}_", (g,)) for g in GROUPS]:
        vec = sum((v for k, v in by_word.items() if k[2] in groups), np.zeros(5))
        avg = vec[:4] / max(vec[4], 1)
        out |= {key.format(prefix): float(x) for key, x in zip(keys, avg, strict=True)}
        out[f"{prefix}words" if prefix else "grounded_words"] = int(vec[4])
    out["grounding_by_word"] = [
        {"kind": kind, "position": pos + 1, "group": group, "words": int(v[4]),
         **{n: float(x) for n, x in zip(_FIGURES, v[:4] / v[4], strict=True)}}
        for (kind, pos, group), v in sorted(by_word.items())]
    return out


def grounding_table(metrics: dict) -> str:
    """The grounding figures of `grounding` as a small text table (model vs uniform)."""
    def row(name: str, words: int, mass: float, uniform_mass: float, max_inside: float,
            uniform_max_inside: float) -> str:
        return (f"{name:28}{words:>6}  {mass:>6.3f} {uniform_mass:>7.3f}  {max_inside:>6.3f} "
                f"{uniform_max_inside:>7.3f}")

    lines = ["attention grounding (teacher-forced; inside the named ducks' boxes)",
             f"{'':28}{'words':>6}  {'mass':>6} {'uniform':>7}  {'max-in':>6} {'uniform':>7}"]
    for name, p, n in [("colour words", "colour_", metrics.get("colour_words", 0)),
                       ("count words", "count_", metrics.get("count_words", 0)),
                       ("overall", "", metrics.get("grounded_words", 0))]:
        lines.append(row(name, n, metrics[f"grounding_{p}mass"], metrics[f"uniform_{p}mass"],
                         metrics[f"grounding_{p}max_inside"],
                         metrics[f"uniform_{p}max_inside"]))
    by_word = metrics.get("grounding_by_word", [])
    if by_word:
        lines.append("by caption template and word position (1 = the first word)")
    for r in by_word:
        lines.append(row(f"  {r['kind']} {r['position']} ({r['group']})", r["words"], r["mass"],
                         r["uniform_mass"], r["max_inside"], r["uniform_max_inside"]))
    return "\n".join(lines)
