"""Image captioning with spatial attention: data + :class:`Captioner` + the trainer + overlays.

``data="synthetic"`` (default) draws rubber-duck scenes (:mod:`attnkit.data.scenes`) with one
correct caption each: train, valid and test sets come from seeds ``3 * seed``, ``3 * seed + 1``
and ``3 * seed + 2``. Real data: ``"flickr:TOKEN_FILE:IMAGE_DIR"`` or ``"coco:JSON:IMAGE_DIR"``;
images are split train/valid/test by ``valid_fraction`` (deterministic by seed).

A run folder holds ``config.json`` (app metadata + train config), ``vocab.json``,
``model.json`` (the :class:`CaptionerConfig`), ``metrics.jsonl``, ``best.safetensors`` (the
checkpoint with the best validation exact match, BLEU-4 on real data; exact ties go to the
lower validation loss) and ``last/``.

Example::

    train(out="runs/ducks")                            # synthetic scenes, 2-9 min on 2 CPUs
    m = evaluate("runs/ducks")   # {"accuracy", "bleu4", "grounding_count_mass", ...}
    print(grounding_table(m))    # colour / count / overall words: mass, max-in, vs uniform;
                                 # then one row per caption template and word position
    pred = predict("runs/ducks", "duck.png", out="duck_attention.png", html="duck.html")
    pred.words, pred.maps.shape                              # ['a', 'blue', ...], (6, 8, 8)
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnkit.data.captions import load_image, read_coco_captions, read_flickr_tokens
from attnkit.data.scenes import COLOURS, NUMBERS, Scene, make_scenes
from attnkit.data.vocab import Vocab
from attnkit.decoding import beam_search, greedy_decode
from attnkit.errors import CheckpointError, DataError
from attnkit.models.captioner import Captioner, CaptionerConfig, caption_loss

DEFAULTS = {"num_train": 6000, "num_valid": 300, "num_test": 500, "image_size": 64}
# CaptionerConfig fields the app changes from the class defaults (which stay as they were so
# old model.json files load unchanged). The state starts blank and the encoder sees the whole
# image, so the first word must come from a glimpse at the ducks, not from a pooled init state;
# a preliminary glimpse steers that first look ("glimpse"). With the blank query alone it
# looked at every image the same way: count words' max-inside was 0.44 (the odd duck's "a":
# 0.11); with the glimpse 0.41-0.86 over seeds 0-5 (0.73 for seed 0; the odd duck's "a"
# 0.69-1.0, but ~0 in 2 of 6 seeds). Without the encoder's global context the first word's
# look got worse (count words 0.34 / 0.53, seeds 0-1), not better.
MODEL_DEFAULTS = {"init_pool": "glimpse", "global_context": True}
# The first word stalls at "a" for 8-20 epochs before the glimpse learns to count; 40 epochs at
# 2e-3 reached 0.998-1.0 exact match in 6 of 6 seeds (30 epochs: 2 of 3; 12 epochs: 0.86).
TRAIN_DEFAULTS = {"epochs": 40, "batch_size": 32, "lr": 2e-3, "schedule": "cosine",
                  "warmup_steps": 100, "grad_clip": 5.0, "max_minutes": 9.0}
# Caption words whose attention must land on the objects they name (the grounding figure).
GROUNDED_WORDS = frozenset(COLOURS) | frozenset(NUMBERS.values()) | {"a"}
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased words of a real caption (punctuation dropped)."""
    return _WORD.findall(text.lower())


@dataclass
class CaptionData:
    """Images + tokenized reference captions (+ ground-truth scenes for synthetic data).

    Attributes:
        images: uint8 ``[N, 3, S, S]``.
        refs: per image, one or more reference captions as word lists (the first is trained on).
        scenes: the synthetic scenes (word boxes), or None for real data.
    """

    images: Tensor
    refs: list[list[list[str]]]
    scenes: list[Scene] | None = None

    def __len__(self) -> int:
        return len(self.refs)


def _to_chw(images: list[np.ndarray]) -> Tensor:
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()


def _synthetic(n: int, seed: int, size: int) -> CaptionData:
    scenes = make_scenes(n, seed, size)
    return CaptionData(_to_chw([s.image for s in scenes]), [[s.caption] for s in scenes], scenes)


def _real(spec: str, size: int, valid_fraction: float, seed: int) -> dict[str, CaptionData]:
    kind, _, rest = spec.partition(":")
    captions, _, image_dir = rest.rpartition(":")
    readers = {"flickr": read_flickr_tokens, "coco": read_coco_captions}
    if kind not in readers or not captions or not image_dir:
        raise DataError("data must be 'synthetic', 'flickr:TOKEN_FILE:IMAGE_DIR' or "
                        f"'coco:JSON:IMAGE_DIR', got {spec!r}")
    items = readers[kind](captions, image_dir, missing_images="skip").items
    if len(items) < 3:
        raise DataError(f"need at least 3 captioned images, found {len(items)}", path=captions)
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_hold = max(1, round(valid_fraction * len(items)))
    parts = {"valid": order[:n_hold], "test": order[n_hold:2 * n_hold],
             "train": order[2 * n_hold:]}
    out = {}
    for name, idx in parts.items():
        imgs = [load_image(items[i].image, size) for i in idx]
        refs = [[tokenize(c) for c in items[i].captions] for i in idx]
        out[name] = CaptionData(_to_chw(imgs), refs)
    return out


def load_splits(data: str, seed: int, *, num_train: int, num_valid: int, num_test: int,
                image_size: int, valid_fraction: float = 0.05) -> dict[str, CaptionData]:
    """``{"train", "valid", "test"}`` for ``data`` (see the module docs)."""
    if data == "synthetic":
        return {"train": _synthetic(num_train, 3 * seed, image_size),
                "valid": _synthetic(num_valid, 3 * seed + 1, image_size),
                "test": _synthetic(num_test, 3 * seed + 2, image_size)}
    return _real(data, image_size, valid_fraction, seed)


class CaptionDataset(torch.utils.data.Dataset):
    """Item ``i`` = ``(image uint8 [3, S, S], ids [BOS, w1 .. wn, EOS])`` of the first reference.

    With ``map_side`` (synthetic scenes only) items get a third part, ``maps float32 [n + 1,
    side, side]``: row ``t`` is the :func:`box_coverage` of the ducks word ``t`` names (zeros
    for words naming nothing and for EOS), the target of supervised attention.
    """

    def __init__(self, data: CaptionData, vocab: Vocab, max_len: int,
                 map_side: int | None = None):
        self.images = data.images
        self.ids = [vocab.encode(r[0][:max_len], add_bos=True, add_eos=True) for r in data.refs]
        self.maps = None
        if map_side is not None:
            if data.scenes is None:
                raise ValueError("attention targets need synthetic scenes (word boxes)")
            size = int(data.images.shape[-1])
            self.maps = []
            for ids, scene in zip(self.ids, data.scenes, strict=True):
                maps = np.zeros((len(ids) - 1, map_side, map_side), np.float32)
                for pos, boxes in scene.word_boxes.items():
                    if pos < len(ids) - 2:  # words cut by max_len have no row
                        maps[pos] = box_coverage(boxes, size, map_side)
                self.maps.append(torch.from_numpy(maps))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        if self.maps is not None:
            return self.images[i], self.ids[i], self.maps[i]
        return self.images[i], self.ids[i]


def collate(items, pad_id: int = 0) -> dict[str, Tensor]:
    """-> ``images [B, 3, S, S]``, ``tgt_in``/``tgt_out [B, T]`` (padded), ``lengths [B]``
    (+ ``maps [B, T, side, side]``, zero-padded, when the items carry attention targets)."""
    images, ids, *maps = zip(*items, strict=True)
    width = max(len(s) for s in ids) - 1
    tgt = torch.full((len(ids), width + 1), pad_id, dtype=torch.long)
    for b, s in enumerate(ids):
        tgt[b, :len(s)] = torch.tensor(s)
    batch = {"images": torch.stack(images), "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:],
             "lengths": torch.tensor([len(s) - 1 for s in ids])}
    if maps:
        side = maps[0][0].shape[-1]
        padded = torch.zeros(len(ids), width, side, side)
        for b, m in enumerate(maps[0]):
            padded[b, :m.shape[0]] = m
        batch["maps"] = padded
    return batch


def _loss_fn(supervision: float):
    from attnkit.training import LossOutput

    def loss_fn(model, batch):
        loss, _, count = caption_loss(model, batch["images"], batch["tgt_in"],
                                      batch["tgt_out"], batch["lengths"],
                                      target_maps=batch.get("maps"), supervision=supervision)
        return LossOutput(loss=loss, count=count)

    return loss_fn


# ---------------------------------------------------------------------- decoding + metrics
def decode_captions(model: Captioner, images: Tensor, *, beam_size: int = 1,
                    batch_size: int = 256) -> list[tuple[list[int], np.ndarray]]:
    """Greedy (``beam_size=1``) or beam-search captions with the map of every word.

    Reuses :mod:`attnkit.decoding` through the step API: each image is a "source" of
    ``H * W`` locations, so the decoders' ``[len, H*W]`` rows reshape to maps.

    Args:
        images: ``[N, 3, S, S]`` (on the model's device or CPU).

    Returns:
        Per image ``(token ids without BOS/EOS, maps float32 [len(ids), H, W])``.
    """
    device = next(model.parameters()).device
    cfg = model.config
    side = cfg.feature_size
    out = []
    for start in range(0, images.shape[0], batch_size):
        chunk = images[start:start + batch_size].to(device)
        lengths = torch.full((chunk.shape[0],), side * side, dtype=torch.long, device=device)
        # ratio 1 + offset 0 would allow H*W words: max_len is the real limit (+1 for EOS).
        kw = {"max_len_ratio": 1.0, "max_len_offset": 0, "max_len": cfg.max_caption_len + 1}
        if beam_size == 1:
            hyps = greedy_decode(model, chunk, lengths, **kw)
        else:
            hyps = beam_search(model, chunk, lengths, beam_size=beam_size, **kw)
        for h in hyps:
            maps = (np.zeros((0, side, side), np.float32) if h.attention is None
                    else h.attention.numpy().reshape(-1, side, side).astype(np.float32))
            out.append((h.tokens, maps))
    return out


def bleu4(hyps: list[list[str]], refs: list[list[list[str]]]) -> float:
    """sacrebleu corpus BLEU-4 as a fraction 0..1; ``refs[i]`` holds image ``i``'s references."""
    import sacrebleu

    if not hyps:
        return 0.0
    n = max(len(r) for r in refs)
    # sacrebleu wants reference *streams*; images with fewer references repeat their first one.
    streams = [[" ".join(r[k] if k < len(r) else r[0]) for r in refs] for k in range(n)]
    return sacrebleu.corpus_bleu([" ".join(h) for h in hyps], streams).score / 100.0


@torch.no_grad()
def caption_metrics(model: Captioner, data: CaptionData, vocab: Vocab, *,
                    beam_size: int = 1) -> dict[str, float]:
    """``{"accuracy", "bleu4", "examples"}``: exact match against any reference, corpus BLEU."""
    was = model.training
    decoded = decode_captions(model, data.images, beam_size=beam_size)
    model.train(was)
    hyps = [vocab.decode(ids, strip_specials=False) for ids, _ in decoded]
    exact = sum(h in refs for h, refs in zip(hyps, data.refs, strict=True))
    return {"accuracy": exact / max(len(hyps), 1), "bleu4": bleu4(hyps, data.refs),
            "examples": len(hyps)}


@torch.no_grad()
def validation_loss(model: Captioner, data: CaptionData, vocab: Vocab,
                    batch_size: int = 256) -> float:
    """Teacher-forced token cross-entropy (nats per token) on the first reference of each
    image: what breaks ties when accuracy saturates on the validation set."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    total, tokens = 0.0, 0
    for start in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(start, min(start + batch_size, len(ds)))],
                        vocab.pad_id)
        _, ce, count = caption_loss(model, *(batch[k].to(device) for k in
                                             ("images", "tgt_in", "tgt_out", "lengths")))
        total, tokens = total + float(ce) * count, tokens + count
    model.train(was)
    return total / max(tokens, 1)


def box_coverage(boxes, image_size: int, side: int) -> np.ndarray:
    """Share of each feature cell's pixels inside the union of ``boxes``: ``[side, side]``.

    A cell's attention weight is spread evenly over the ``image_size / side`` pixel block it
    covers, so ``sum(alpha * coverage)`` is the attention mass inside the boxes.
    """
    mask = np.zeros((image_size, image_size), np.float64)
    for x0, y0, x1, y1 in boxes:
        mask[y0:y1, x0:x1] = 1.0
    cell = image_size // side
    return mask.reshape(side, cell, side, cell).mean(axis=(1, 3))


GROUPS = ("colour", "count")


def word_group(word: str) -> str | None:
    """``"colour"``, ``"count"`` (numbers and "a") or None for words not graded."""
    if word in COLOURS:
        return "colour"
    return "count" if word in GROUNDED_WORDS else None


@torch.no_grad()
def grounding(model: Captioner, data: CaptionData, vocab: Vocab,
              batch_size: int = 256) -> dict[str, float]:
    """Where colour and count words look, with the gold caption fed (teacher forcing).

    For each such word of each held-out scene: ``mass`` = attention inside the union of the
    boxes of the ducks the word names (a count word names every duck it counts), ``max_inside``
    = the most attended cell is mostly (>= half) inside them. The same two figures for uniform
    attention (the union's share of the image; the share of such cells) are the baseline. The
    map of word ``t`` is the one used to predict it (attended from the state after word
    ``t - 1``; BOS for the first word).

    Returns:
        Averages over words: ``grounding_mass``, ``grounding_max_inside``, ``uniform_mass``,
        ``uniform_max_inside``, ``grounded_words`` (all graded words), the same per group as
        ``grounding_colour_mass``, ``uniform_count_max_inside``, ``colour_words``, ... ; and
        ``grounding_by_word``, one row per caption template and word position (``{"kind",
        "position"`` (1-based)``, "group", "words", "mass", "max_inside", "uniform_mass",
        "uniform_max_inside"}``), which shows which words find their ducks and which do not;
        ``{}`` without ground-truth scenes.
    """
    if data.scenes is None:
        return {}
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    side, size = model.config.feature_size, model.config.image_size
    # (template, position, group) -> summed [mass, max inside, uniform mass, uniform max
    # inside, words]; the group and overall figures are sums of these rows.
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
    model.train(was)
    keys = ("grounding_{}mass", "grounding_{}max_inside", "uniform_{}mass", "uniform_{}max_inside")
    out: dict = {}
    for prefix, groups in [("", GROUPS)] + [(f"{g}_", (g,)) for g in GROUPS]:
        vec = sum((v for k, v in by_word.items() if k[2] in groups), np.zeros(5))
        avg = vec[:4] / max(vec[4], 1)
        out |= {key.format(prefix): float(x) for key, x in zip(keys, avg, strict=True)}
        out[f"{prefix}words" if prefix else "grounded_words"] = int(vec[4])
    names = [key.format("").removeprefix("grounding_") for key in keys]  # mass, ...
    out["grounding_by_word"] = [
        {"kind": kind, "position": pos + 1, "group": group, "words": int(v[4]),
         **{n: float(x) for n, x in zip(names, v[:4] / v[4], strict=True)}}
        for (kind, pos, group), v in sorted(by_word.items())]
    return out


def grounding_table(metrics: dict) -> str:
    """The grounding figures of :func:`grounding` as a small text table (model vs uniform)."""
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


# ---------------------------------------------------------------------- train / load / evaluate
def train(out, data: str = "synthetic", *, num_train: int | None = None,
          num_valid: int | None = None, num_test: int | None = None,
          image_size: int | None = None, attention: str = "soft", resume: bool = False,
          model_overrides: dict | None = None, threads: int | None = 1,
          attention_supervision: float = 0.0, **train_overrides):
    """Train a captioning run into ``out``; returns the trainer's ``TrainResult``.

    Args:
        out: the run folder.
        data: ``"synthetic"`` or a real data spec (module docs).
        num_train, num_valid, num_test: synthetic set sizes (defaults in :data:`DEFAULTS`).
        image_size: image side in pixels (64; a multiple of 8, the feature map is ``S / 8``).
        attention: ``"soft"`` or ``"hard"``.
        resume: continue ``out/last`` exactly (same data and settings are reloaded from the run).
        model_overrides: :class:`CaptionerConfig` fields to change.
        attention_supervision: weight of supervised attention (synthetic data only): the
            loss adds ``-log`` of each named word's attention mass inside its ducks' boxes
            (:func:`~attnkit.models.captioner.attention_supervision_penalty`). 0 (default)
            = attention is learned from the captions alone, as in the paper; > 0 trains on
            the very boxes the grounding figures score, so those figures then measure
            fitting, not emergent grounding.
        threads: torch CPU threads while training (None = leave as is). One by default: the
            model's small convolutions and per-word LSTM steps gain little from a second
            thread, and on a shared CPU two spinning threads ran 12x slower than one.
        **train_overrides: TrainConfig fields (epochs, batch_size, lr, seed, device,
            max_minutes, progress, ...); None values keep the defaults.
    """
    from attnkit.training import TrainConfig, Trainer, seed_everything

    out = Path(out)
    if resume:
        meta = _read_json(out / "config.json")
        settings = meta["data_settings"]
        attention_supervision = float(meta.get("attention_supervision", 0.0))
        train_overrides = {**{k: v for k, v in meta.get("train", {}).items()
                              if k in TRAIN_DEFAULTS or k in ("seed", "device")},
                           **{k: v for k, v in train_overrides.items() if v is not None}}
    else:
        settings = {"data": data, "num_train": num_train or DEFAULTS["num_train"],
                    "num_valid": num_valid or DEFAULTS["num_valid"],
                    "num_test": num_test or DEFAULTS["num_test"],
                    "image_size": image_size or DEFAULTS["image_size"]}
    seed = int(train_overrides.get("seed") or 0)
    if attention_supervision < 0 or (attention_supervision > 0
                                     and settings["data"] != "synthetic"):
        raise ValueError("attention_supervision must be >= 0 and needs synthetic data (boxes), "
                         f"got {attention_supervision} with data={settings['data']!r}")
    size = int(settings["image_size"])
    if size % 8 or size < 32:
        raise ValueError(f"image_size must be a multiple of 8 and >= 32, got {size}")
    splits = load_splits(settings["data"], seed, **{k: v for k, v in settings.items()
                                                    if k != "data"})
    out.mkdir(parents=True, exist_ok=True)
    if resume:
        vocab = Vocab.from_json(out / "vocab.json")
        model_cfg = CaptionerConfig.from_dict(_read_json(out / "model.json"))
    else:
        vocab = Vocab.build(r[0] for r in splits["train"].refs)
        vocab.to_json(out / "vocab.json")
        model_cfg = CaptionerConfig(**{
            "image_size": size, "feature_size": size // 8, "attention": attention,
            "max_caption_len": max(len(r[0]) for r in splits["train"].refs),
            **MODEL_DEFAULTS, **(model_overrides or {}), "vocab_size": len(vocab),
            "pad_id": vocab.pad_id, "bos_id": vocab.bos_id, "eos_id": vocab.eos_id,
            "unk_id": vocab.unk_id})
        _write_json(out / "model.json", model_cfg.to_dict())
    seed_everything(seed)  # the initial weights too are a function of the seed
    model = Captioner(model_cfg)
    train_set = CaptionDataset(splits["train"], vocab, model_cfg.max_caption_len,
                               model_cfg.feature_size if attention_supervision > 0 else None)
    synthetic = settings["data"] == "synthetic"
    select = "accuracy" if synthetic else "bleu4"

    def evaluate_fn(m):
        return {**caption_metrics(m, splits["valid"], vocab),
                "loss": validation_loss(m, splits["valid"], vocab)}

    # Validation accuracy reaches 1.0 long before training ends (after 12-21 of 40 epochs
    # on the ducks); the loss then picks the later, better-trained checkpoint among those ties.
    cfg = TrainConfig(**{**TRAIN_DEFAULTS, "select_metric": select, "select_mode": "max",
                         "select_tiebreak": "loss",
                         **{k: v for k, v in train_overrides.items() if v is not None}})
    trainer = Trainer(model, cfg, out, train_dataset=train_set,
                      collate_fn=lambda items: collate(items, vocab.pad_id),
                      loss_fn=_loss_fn(attention_supervision), evaluate_fn=evaluate_fn,
                      run_metadata={"app": "caption", "model": model_cfg.to_dict(),
                                    "data_settings": settings,
                                    "attention_supervision": attention_supervision,
                                    "parameters": sum(p.numel() for p in model.parameters())})
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return trainer.fit(resume=resume)
    finally:
        torch.set_num_threads(before)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: not a caption run (no {path.name})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: not valid JSON ({err})") from err


def _write_json(path: Path, obj) -> None:
    from attnkit.fileio import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def load_run(run, device: str = "cpu") -> tuple[Captioner, Vocab, dict]:
    """The best model of a run (eval mode), its vocabulary and its ``config.json``."""
    from attnkit.training.checkpoint import load_weights

    run = Path(run)
    meta = _read_json(run / "config.json")
    if meta.get("app") != "caption":
        raise CheckpointError(f"{run}: not a caption run (config.json app={meta.get('app')!r})")
    model = Captioner(CaptionerConfig.from_dict(_read_json(run / "model.json")))
    load_weights(model, run / "best.safetensors")
    try:
        vocab = Vocab.from_json(run / "vocab.json")
    except FileNotFoundError:
        raise CheckpointError(f"{run}: not a caption run (no vocab.json)") from None
    return model.to(device).eval(), vocab, meta


def evaluate(run, *, beam_size: int = 1, device: str = "cpu", num_test: int | None = None) -> dict:
    """Metrics of a run's best model on its held-out test set.

    Returns:
        ``{"accuracy", "bleu4", "examples", "beam_size", "attention_supervision"}`` (the
        training weight of supervised attention, 0 = none) and, for synthetic data, the
        grounding figures of :func:`grounding` (model vs uniform attention).
    """
    model, vocab, meta = load_run(run, device)
    s = meta["data_settings"]
    seed = int(meta.get("train", {}).get("seed", 0))
    if s["data"] == "synthetic":
        test = _synthetic(num_test or s["num_test"], 3 * seed + 2, s["image_size"])
    else:
        test = _real(s["data"], s["image_size"], 0.05, seed)["test"]
    # A run trained with supervised attention fitted the very boxes grounding scores: say so.
    return {**caption_metrics(model, test, vocab, beam_size=beam_size),
            **grounding(model, test, vocab), "beam_size": beam_size,
            "attention_supervision": float(meta.get("attention_supervision", 0.0))}


# ---------------------------------------------------------------------- predict
@dataclass
class CaptionPrediction:
    """``words`` of the caption, ``maps [len(words), H, W]``, ``image`` uint8 ``[D, D, 3]`` shown
    under the overlays, and the files written (or None)."""

    words: list[str]
    maps: np.ndarray
    image: np.ndarray
    figure: Path | None = None
    html: Path | None = None

    @property
    def caption(self) -> str:
        return " ".join(self.words)


def predict(run, image, *, out=None, html=None, beam_size: int = 1, device: str = "cpu",
            display_size: int = 256) -> CaptionPrediction:
    """Caption one image and draw where each word looked.

    Args:
        run: the run folder.
        image: a file path (any format :func:`~attnkit.data.captions.load_image` reads:
            grayscale, RGBA, large photos are converted and resized) or uint8 ``[H, W, 3]``.
        out: write the overlay grid (one panel per word) to this PNG.
        html: write an HTML report (caption + grid) here.
        beam_size: 1 = greedy.
        display_size: side of the image under the overlays.

    Raises:
        DataError: the file is missing or not a readable image (names the file).
    """
    from attnkit.viz import HtmlReport, attention_grid

    model, vocab, _ = load_run(run, device)
    size = model.config.image_size
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"image must be uint8 [H, W, 3], got {image.dtype} "
                             f"{list(image.shape)}")
        from PIL import Image

        pil = Image.fromarray(image)
        pixels = np.asarray(pil.resize((size, size), Image.Resampling.BICUBIC))
        shown = np.asarray(pil.resize((display_size, display_size), Image.Resampling.BICUBIC))
    else:
        pixels = load_image(image, size)
        shown = load_image(image, display_size)
    ids, maps = decode_captions(model, _to_chw([pixels]), beam_size=beam_size)[0]
    words = vocab.decode(ids, strip_specials=False)  # one word per map, even <unk>
    pred = CaptionPrediction(words, maps, shown)
    fig = None
    if out is not None or html is not None:
        fig = attention_grid(shown, maps, words, out)
        pred.figure = None if out is None else Path(out)
    if html is not None:
        report = HtmlReport("attnkit caption")
        report.add_text(f"Caption: {pred.caption}")
        report.add_figure(fig, caption="attention of each word (the map used to predict it)")
        pred.html = report.write(html)
    return pred
