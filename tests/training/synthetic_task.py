"""A tiny regression task for the trainer tests; also a script (run alone or under torchrun).

    python tests/training/synthetic_task.py RUN_DIR [--resume] [--epochs 3] [--die-at-step N]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import torch
from torch import nn

from attnkit.training import LossOutput, TrainConfig, Trainer, seed_everything

DIM = 6


def make_data(n: int = 96, seed: int = 123) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` pairs ``(x [DIM], y [1])`` with ``y = sin(x) . w + noise`` (``w`` fixed)."""
    w = torch.randn(DIM, 1, generator=torch.Generator().manual_seed(99))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    y = torch.sin(x) @ w + 0.05 * torch.randn(n, 1, generator=g)
    return list(zip(x, y, strict=True))


def make_model(dropout: float = 0.1, seed: int = 0, hidden: int = 16) -> nn.Module:
    seed_everything(seed)
    return nn.Sequential(nn.Linear(DIM, hidden), nn.Tanh(), nn.Dropout(dropout),
                         nn.Linear(hidden, 1))


def collate(examples: list) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*examples, strict=True)
    return torch.stack(xs), torch.stack(ys)


def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> LossOutput:
    x, y = batch
    return LossOutput(nn.functional.mse_loss(model(x), y), x.shape[0])


def make_evaluate(valid: list):
    x, y = collate(valid)

    def evaluate(model: nn.Module) -> dict[str, float]:
        mse = float(nn.functional.mse_loss(model(x), y).detach())
        return {"loss": mse, "neg_loss": -mse}
    return evaluate


def make_trainer(run_dir, cfg: TrainConfig, *, dropout: float = 0.1, n: int = 96,
                 loss=loss_fn, hidden: int = 16) -> Trainer:
    data = make_data(n)
    valid = make_data(32, seed=7)
    model = make_model(dropout, hidden=hidden)
    return Trainer(model, cfg, run_dir, train_dataset=data, collate_fn=collate, loss_fn=loss,
                   evaluate_fn=make_evaluate(valid), run_metadata={"app": "synthetic"})


def script_config(epochs: int = 3, batch_size: int = 16,
                  checkpoint_every: int | None = None) -> TrainConfig:
    """The config the script trains with (tests build the same one in-process).

    float32 (``amp="off"``): the tests compare 2 ranks with 1 process to 1e-5, and bf16 rounds
    the gradient sums of a batch split in two differently from those of the whole batch.
    """
    return TrainConfig(epochs=epochs, batch_size=batch_size, lr=1e-2, seed=1, device="cpu",
                       schedule="cosine", warmup_steps=3, log_every_steps=1,
                       checkpoint_every_steps=checkpoint_every, eval_every_steps=5,
                       progress=False, amp="off")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--checkpoint-every", type=int, default=None)
    p.add_argument("--die-at-step", type=int, default=None,
                   help="SIGKILL this process in the forward of this (1-based) step")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step (slow run)")
    p.add_argument("--num-examples", type=int, default=96)
    args = p.parse_args()
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        if args.die_at_step is not None and calls["n"] == args.die_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.sleep:
            time.sleep(args.sleep)
        return loss_fn(model, batch)

    cfg = script_config(args.epochs, args.batch_size, args.checkpoint_every)
    trainer = make_trainer(args.run_dir, cfg, dropout=args.dropout, n=args.num_examples,
                           loss=loss)
    result = trainer.fit(resume=args.resume)
    print(f"RESULT {result.stop_reason} {result.global_step}", flush=True)
    if result.stop_reason == "signal":
        return 128 + int(getattr(signal, result.signal or "SIGTERM"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
