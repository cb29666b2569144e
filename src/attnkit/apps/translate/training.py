"""The translate app's training wiring: the loss, the validation BLEU that selects
checkpoints, and the `attnkit.training.Trainer` built from the prepared data (`fit`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.apps.results import FINAL_EVALUATION, Log
from attnkit.apps.translate.engines import AttnkitEngine
from attnkit.apps.translate.pipeline import TranslatePipeline
from attnkit.apps.translate.prepare import TranslatePrepared
from attnkit.apps.translate.settings import align_layer
from attnkit.bleu import bleu_chrf
from attnkit.data.batching import bucket_batch_plan
from attnkit.data.pairs import group_references
from attnkit.data.translation import TranslationDataset, collate_translation
from attnkit.data.translation_splits import Pair
from attnkit.models import build_model
from attnkit.models.losses import alignment_loss
from attnkit.training import LossOutput, Trainer, TrainResult


def loss_fn(label_smoothing: float, pad_id: int,
            align: tuple[float, int] | None = None) -> Callable:
    """Token cross-entropy of teacher-forced decoding, padding left out (the numbers of
    `attnkit.models.masked_cross_entropy`, without reading the token count back or selecting
    rows by a mask: a compiled step stays one graph); with ``align`` ``(weight, layer)``, plus
    ``weight`` times `alignment_loss` of that decoder layer's first head, read at the position
    where each target piece is the input (the batch's ``"align"`` rows)."""
    def compute(model: nn.Module, batch: dict[str, torch.Tensor]) -> LossOutput:
        args = batch["src"], batch["src_lengths"], batch["tgt_in"]
        logits, attention = (model(*args), None) if align is None else model(
            *args, weights_of=align[1])
        targets = batch["tgt_out"]
        total = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                                ignore_index=pad_id, reduction="sum",
                                label_smoothing=label_smoothing)
        count = (targets != pad_id).sum()
        loss = total / count.clamp_min(1)
        if attention is not None:
            loss = loss + align[0] * alignment_loss(attention[:, 0], batch["align"])
        return LossOutput(loss, count)
    return compute


def valid_fn(pipeline: TranslatePipeline, pairs: Sequence[Pair]) -> Callable:
    """Greedy BLEU on ``pairs`` (grouped references): the trainer's selection metric."""
    groups = group_references(list(pairs))

    def evaluate_fn(model: nn.Module) -> dict[str, float]:
        preds = AttnkitEngine(model, pipeline).translate([en for en, _ in groups])
        return {"bleu": bleu_chrf([p.text for p in preds], [r for _, r in groups])["bleu"]}
    return evaluate_fn


def make_trainer(prep: TranslatePrepared, out: Path, *, log: Log, evaluate: bool = True) -> Trainer:
    """The run's model (seeded by the caller) and its `attnkit.training.Trainer` (without a
    validation when not ``evaluate``: `benchmarks/train_speed.py` times its steps)."""
    s, pipeline, config = prep.config.settings, prep.pipeline, prep.model_config
    net = build_model(config)
    log(f"model: {config.arch} {sum(p.numel() for p in net.parameters()) / 1e6:.2f}M "
        "parameters " + (f"({config.cell}, {config.attention} attention, {config.style} style)"
                         if config.arch == "rnn" else f"(d_model {config.d_model})"))
    dataset = TranslationDataset.from_token_pairs(prep.train_tokens, pipeline.src_vocab,
                                                  pipeline.tgt_vocab, prep.train_links)
    align = None if not s.align_loss else (s.align_loss, align_layer(s, config))
    valid = prep.splits["valid"][:s.valid_sample]
    # Without a validation there is nothing to stop early on.
    cfg = prep.train if evaluate else dataclasses.replace(prep.train, early_stopping_patience=None)
    return Trainer(
        net, cfg, out, train_dataset=dataset,
        collate_fn=functools.partial(collate_translation, pad_id=config.pad_id,
                                     bos_id=config.bos_id, eos_id=config.eos_id),
        loss_fn=loss_fn(s.label_smoothing, config.pad_id, align),
        evaluate_fn=valid_fn(pipeline, valid) if evaluate else None,
        batch_plan=bucket_batch_plan(dataset.lengths(), prep.train.batch_size,
                                     max_tokens=s.batch_tokens),
        run_metadata=prep.metadata, next_stage=FINAL_EVALUATION,
        # The Transformer's step compiles to one graph (the RNN's, a loop over time, does not
        # pay): benchmarks/train_speed.py, docs/results.md ("Compiled training").
        compile_pays=config.arch == "transformer")


def fit(prep: TranslatePrepared, out: Path, *, resume: bool, log: Log) -> TrainResult:
    """Build the model (seeded by the caller) and train it, or continue ``last/``."""
    result = make_trainer(prep, out, log=log).fit(resume=resume)
    if not result.finished_before:
        best = "none yet" if result.best_metric is None else f"{result.best_metric:.2f}"
        log(f"training stopped ({result.stop_reason}) after {result.global_step} steps, "
            f"{result.elapsed:.0f} s; best validation BLEU {best}")
    return result
