"""Caption explanations and how far they ground: where each caption word came from in the
image (`word_maps`: the attention map that predicted it, or gradient x input and integrated
gradients of its log-probability by the encoder's feature map), and on the synthetic duck
scenes (`attnkit.data.scenes`), whether colour and count words land on the ducks they name:
`grounding` (attention's mass inside their boxes, beside uniform attention) and
`pointing_game` (Zhang et al. 2016: the strongest cell of each method's map inside them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnkit.data.caption_data import CaptionData, CaptionDataset, box_coverage, collate
from attnkit.data.scenes import COLOURS, NUMBERS
from attnkit.data.vocab import Vocab
from attnkit.explain.captum import grad_x_input, integrated_gradients
from attnkit.explain.trust import RANDOM
from attnkit.models.captioner import Captioner

METHODS = ("attention", "grad-input", "integrated-gradients")
# Caption words explained in one forward and backward pass (each holds its image's feature
# map): the memory bound of a gradient method, however many images a call explains.
ROWS_A_PASS = 256


def word_maps(model: Captioner, images: Tensor, tgt_in: Tensor, tgt_out: Tensor, method: str,
              *, steps: int = 32) -> Tensor:
    """``[batch, T, H, W]`` maps (each summing to 1) of the words ``tgt_out`` fed as ``tgt_in``
    (``<bos>`` first) for ``images [batch, 3, S, S]``, by ``method`` (one of `METHODS`;
    UsageError: Captum missing for a gradient one)."""
    if method == "attention":
        with torch.no_grad():
            _, alphas = model(images, tgt_in)
        return alphas.float()

    def forward(features: Tensor, tgt_in: Tensor, gold: Tensor) -> Tensor:
        state = model.encode(None, beams=1, use_cache=True, weights="none",
                             features=features)    # the images are not read again
        logits = model.step(tgt_in, state, weights="none", logits=True).logits
        logp = torch.log_softmax(logits.float(), -1)
        return logp.gather(-1, gold.unsqueeze(-1))[..., 0]            # [rows, T]

    batch, length = tgt_in.shape
    with torch.no_grad():
        feats = model.encoder(images)                                    # [B, C, H, W]
    rows = torch.arange(batch).repeat_interleave(length)
    target = torch.arange(length).repeat(batch).tolist()
    args = (tgt_in[rows], tgt_out[rows])
    if method == "grad-input":
        attr = grad_x_input(forward, feats[rows], target=target, args=args,
                            max_rows=ROWS_A_PASS)
    else:
        attr, _ = integrated_gradients(forward, feats[rows], target=target, args=args,
                                       steps=steps, internal_batch_size=ROWS_A_PASS)
    cells = attr.sum(1).abs().float()                                    # [B*T, H, W]
    cells = cells / cells.flatten(1).sum(-1).clamp_min(1e-12)[:, None, None]
    return cells.view(batch, length, *cells.shape[1:])


# Caption words whose attention must land on the objects they name (the grounding figure).
GROUNDED_WORDS = frozenset(COLOURS) | frozenset(NUMBERS.values()) | {"a"}
GROUPS = ("colour", "count")
# Summed per (template, position, group): mass, max inside, uniform mass, uniform max inside;
# and averaged over all words, then per group (``{}``: "" or "colour_" / "count_").
_FIGURES = ("mass", "max_inside", "uniform_mass", "uniform_max_inside")
_AVERAGES = ("grounding_{}mass", "grounding_{}max_inside", "uniform_{}mass",
             "uniform_{}max_inside")


def word_group(word: str) -> str | None:
    """``"colour"``, ``"count"`` (numbers and "a") or None for words not graded."""
    if word in COLOURS:
        return "colour"
    return "count" if word in GROUNDED_WORDS else None


def _graded_words(model: Captioner, data: CaptionData, vocab: Vocab, batch_size: int,
                  methods: Sequence[str]) -> Iterator[tuple]:
    """``(template, position, group, box coverage [H, W], {method: map [H, W]})`` of each colour
    and count word, the gold caption fed (a count word names every duck it counts)."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    side, size = model.config.feature_size, model.config.image_size
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
                    group = word_group(scene.caption[pos])
                    if group is not None and pos < tgt_in.shape[1]:
                        yield (scene.kind, pos, group, box_coverage(boxes, size, side),
                               {m: maps[m][b, pos] for m in methods})
    finally:
        model.train(was)


def grounding(model: Captioner, data: CaptionData, vocab: Vocab,
              batch_size: int = 256) -> dict:
    """Where colour and count words look, with the gold caption fed (teacher forcing).

    For each such word: ``mass``, the attention inside the boxes of the ducks it names, and
    ``max_inside``, whether the most attended cell is at least half inside them; uniform
    attention gives the baseline. Word ``t``'s map is the one that predicts it.

    Returns:
        Averages over words (``grounding_mass``, ``grounding_max_inside``, ``uniform_mass``,
        ``uniform_max_inside``, ``grounded_words``), the same per group (``grounding_colour_mass``
        ...), and ``grounding_by_word``, one row per template and word position; ``{}`` for
        data without scenes.
    """
    if data.scenes is None:
        return {}
    # (template, position, group) -> summed [*_FIGURES, words]
    by_word: dict[tuple[str, int, str], np.ndarray] = {}
    for kind, pos, group, cov, maps in _graded_words(model, data, vocab, batch_size,
                                                     ("attention",)):
        alpha = maps["attention"]
        top = np.unravel_index(int(alpha.argmax()), alpha.shape)
        by_word[kind, pos, group] = by_word.get((kind, pos, group), np.zeros(5)) + [
            float((alpha * cov).sum()), float(cov[top] >= 0.5), float(cov.mean()),
            float((cov >= 0.5).mean()), 1.0]
    out: dict = {}
    for prefix, groups in [("", GROUPS)] + [(f"{g}_", (g,)) for g in GROUPS]:
        vec = sum((v for k, v in by_word.items() if k[2] in groups), np.zeros(5))
        avg = vec[:4] / max(vec[4], 1)
        out |= {key.format(prefix): float(x) for key, x in zip(_AVERAGES, avg, strict=True)}
        out[f"{prefix}words" if prefix else "grounded_words"] = int(vec[4])
    out["grounding_by_word"] = [
        {"kind": kind, "position": pos + 1, "group": group, "words": int(v[4]),
         **{n: float(x) for n, x in zip(_FIGURES, v[:4] / v[4], strict=True)}}
        for (kind, pos, group), v in sorted(by_word.items())]
    return out


def grounding_table(metrics: dict) -> str:
    """The grounding figures of `grounding` as a small text table (model vs uniform)."""
    def row(name: str, words: int, mass: float, max_inside: float, uniform_mass: float,
            uniform_max_inside: float) -> str:
        return (f"{name:28}{words:>6}  {mass:>6.3f} {uniform_mass:>7.3f}  {max_inside:>6.3f} "
                f"{uniform_max_inside:>7.3f}")

    lines = ["attention grounding (teacher-forced; inside the named ducks' boxes)",
             f"{'':28}{'words':>6}  {'mass':>6} {'uniform':>7}  {'max-in':>6} {'uniform':>7}"]
    for name, p, n in [("colour words", "colour_", "colour_words"),
                       ("count words", "count_", "count_words"), ("overall", "", "grounded_words")]:
        lines.append(row(name, metrics.get(n, 0), *(metrics[k.format(p)] for k in _AVERAGES)))
    by_word = metrics.get("grounding_by_word", [])
    if by_word:
        lines.append("by caption template and word position (1 = the first word)")
    for r in by_word:
        lines.append(row(f"  {r['kind']} {r['position']} ({r['group']})", r["words"],
                         *(r[f] for f in _FIGURES)))
    return "\n".join(lines)


def pointing_game(model: Captioner, data: CaptionData, vocab: Vocab, *,
                  methods: Sequence[str] = METHODS, batch_size: int = 32) -> dict:
    """Hit rates of each method's maps on the named ducks: ``{method: {"hits", "words",
    "accuracy"}}``, with chance as ``"random"`` (the share of cells at least half inside);
    ``{}`` without ground-truth scenes."""
    if data.scenes is None:
        return {}
    hits = {m: 0.0 for m in [*methods, RANDOM]}
    words = 0
    for *_, cov, maps in _graded_words(model, data, vocab, batch_size, methods):
        words += 1
        hits[RANDOM] += float((cov >= 0.5).mean())
        for m in methods:
            hits[m] += float(cov[np.unravel_index(int(maps[m].argmax()), cov.shape)] >= 0.5)
    return {m: {"hits": round(h, 2), "words": words, "accuracy": h / max(words, 1)}
            for m, h in hits.items()}


def pointing_table(table: dict) -> str:
    """`pointing_game` as a few text lines (accuracy per method, chance last)."""
    lines = ["pointing game (the strongest cell of a colour or count word's map on the ducks "
             "it names)", f"{'method':24}{'words':>7}{'accuracy':>10}"]
    for name, row in table.items():
        lines.append(f"{name:24}{row['words']:>7}{row['accuracy']:>10.3f}")
    return "\n".join(lines)
