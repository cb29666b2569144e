"""The caption app's training wiring: the loss (with supervised attention when asked), the
validation metrics that select checkpoints (exact match, BLEU-4 on real data; ties go to the
lower teacher-forced loss), and the `attnkit.training.Trainer`.
"""

from __future__ import annotations

from pathlib import Path

from attnkit.apps.caption.metrics import caption_metrics, validation_loss
from attnkit.apps.caption.prepare import APP, CaptionPrepared
from attnkit.apps.results import FINAL_EVALUATION, Log
from attnkit.apps.run_files import FORMAT
from attnkit.data.caption_data import CaptionDataset, collate
from attnkit.models.captioner import Captioner, caption_loss
from attnkit.training import LossOutput, Trainer, TrainResult


def fit(prep: CaptionPrepared, out: Path, *, resume: bool, log: Log) -> TrainResult:
    """Build the captioner (seeded by the caller) and train it, or continue ``last/``."""
    model = Captioner(prep.model)
    settings, vocab, valid = prep.config.settings, prep.vocab, prep.splits["valid"]
    supervision = settings.attention_supervision
    train_set = CaptionDataset(prep.splits["train"], vocab, prep.model.max_caption_len,
                               prep.model.feature_size if supervision > 0 else None)

    def loss_fn(m, batch):
        loss, _, count = caption_loss(m, batch["images"], batch["tgt_in"], batch["tgt_out"],
                                      batch["lengths"], target_maps=batch.get("maps"),
                                      supervision=supervision)
        return LossOutput(loss=loss, count=count)

    def evaluate_fn(m):
        return {**caption_metrics(m, valid, vocab), "loss": validation_loss(m, valid, vocab)}

    metadata = {"app": APP, "format": FORMAT, "data": settings.data,
                "data_settings": settings.data_settings(),
                "attention_supervision": supervision, "model": prep.model.to_dict(),
                "parameters": sum(p.numel() for p in model.parameters())}
    trainer = Trainer(model, prep.train, out, train_dataset=train_set,
                      collate_fn=lambda items: collate(items, vocab.pad_id), loss_fn=loss_fn,
                      evaluate_fn=evaluate_fn, run_metadata=metadata, next_stage=FINAL_EVALUATION)
    return trainer.fit(resume=resume)
