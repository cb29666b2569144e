"""One model-agnostic trainer: checkpoints, exact resume, DDP under torchrun.

See docs/DEVELOPING.md, "The trainer contract".
"""

from attnkit.training.checkpoint import load_weights, save_weights
from attnkit.training.config import TrainConfig
from attnkit.training.seeding import seed_everything
from attnkit.training.trainer import (
    LossOutput,
    Trainer,
    TrainingError,
    TrainResult,
    default_batch_plan,
)

__all__ = ["LossOutput", "TrainConfig", "TrainResult", "Trainer", "TrainingError",
           "default_batch_plan", "load_weights", "save_weights", "seed_everything"]
