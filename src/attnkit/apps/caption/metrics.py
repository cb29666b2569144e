"""Caption quality: decoding with each word's map, exact match, corpus BLEU-4 (as a fraction
0..1 under ``"bleu4"``, from `attnkit.bleu.bleu_chrf`), and the teacher-forced validation
loss that breaks ties between checkpoints.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnkit.bleu import bleu_chrf
from attnkit.data.caption_data import CaptionData, CaptionDataset, collate
from attnkit.data.vocab import Vocab
from attnkit.decoding import beam_search, greedy_decode
from attnkit.decoding.hypothesis import inference
from attnkit.models.captioner import Captioner, caption_loss


def decode_captions(model: Captioner, images: Tensor, *, beam_size: int = 1,
                    batch_size: int = 256) -> list[tuple[list[int], np.ndarray]]:
    """Greedy (``beam_size=1``) or beam-search captions of ``images`` ``[N, 3, S, S]`` with
    each word's map: per image ``(ids without BOS/EOS, maps float32 [len(ids), H, W])``
    (`attnkit.decoding` with ``H * W`` locations as the source).
    """
    device, side = next(model.parameters()).device, model.config.feature_size
    # ratio 1 + offset 0 would allow H*W words: max_len is the real limit (+1 for EOS).
    kw = {"max_len_ratio": 1.0, "max_len_offset": 0, "max_len": model.config.max_caption_len + 1}
    out = []
    for start in range(0, images.shape[0], batch_size):
        chunk = images[start:start + batch_size].to(device)
        lengths = torch.full((chunk.shape[0],), side * side, dtype=torch.long, device=device)
        hyps = (greedy_decode(model, chunk, lengths, **kw) if beam_size == 1 else
                beam_search(model, chunk, lengths, beam_size=beam_size, **kw))
        for h in hyps:
            maps = (np.zeros((0, side, side), np.float32) if h.attention is None
                    else h.attention.numpy().reshape(-1, side, side).astype(np.float32))
            out.append((h.tokens, maps))
    return out


def bleu4(hyps: list[list[str]], refs: list[list[list[str]]]) -> float:
    """Corpus BLEU-4 (`attnkit.bleu.bleu_chrf`) as a fraction 0..1;
    ``refs[i]`` holds image ``i``'s references (word lists)."""
    if not hyps:
        return 0.0
    scores = bleu_chrf([" ".join(h) for h in hyps], [[" ".join(r) for r in rs] for rs in refs])
    return round(scores["bleu"] / 100.0, 6)


def caption_metrics(model: Captioner, data: CaptionData, vocab: Vocab, *,
                    beam_size: int = 1) -> dict[str, float]:
    """``{"accuracy", "bleu4", "examples"}``: exact match against any reference, corpus BLEU."""
    decoded = decode_captions(model, data.images, beam_size=beam_size)   # in eval mode
    hyps = [vocab.decode(ids, strip_specials=False) for ids, _ in decoded]
    exact = sum(h in refs for h, refs in zip(hyps, data.refs, strict=True))
    return {"accuracy": exact / max(len(hyps), 1), "bleu4": bleu4(hyps, data.refs),
            "examples": len(hyps)}


def validation_loss(model: Captioner, data: CaptionData, vocab: Vocab,
                    batch_size: int = 256) -> float:
    """Teacher-forced token cross-entropy (nats per token) on the first reference of each
    image: what breaks ties when accuracy saturates on the validation set."""
    device = next(model.parameters()).device
    ds = CaptionDataset(data, vocab, model.config.max_caption_len)
    total, tokens = 0.0, 0
    for start in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(start, min(start + batch_size, len(ds)))],
                        vocab.pad_id)
        with inference(model):
            _, ce, count = caption_loss(model, *(batch[k].to(device) for k in
                                                 ("images", "tgt_in", "tgt_out", "lengths")))
        total, tokens = total + float(ce) * count, tokens + count
    return total / max(tokens, 1)
