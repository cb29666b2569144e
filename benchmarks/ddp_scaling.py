"""DDP scaling of attnkit.training: samples/s with 1 and N processes, same global batch.

    .venv/bin/python benchmarks/ddp_scaling.py [--procs 2] [--steps 60] [--batch-size 256]

Runs itself once as a single process and once under ``torchrun --nproc_per_node=N`` (gloo on
CPU, NCCL on GPUs), on a small synthetic MLP regression, then prints samples/s, the overhead
ratio (1-process speed / N-process speed) and whether the final parameters agree (1e-5).
On a machine with only a couple of shared CPU cores expect no speed-up, only overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from attnkit.machine import machine_line
from attnkit.training import LossOutput, TrainConfig, Trainer, load_weights, seed_everything

DIM, HIDDEN = 64, 256


def _model() -> nn.Module:
    seed_everything(0)
    return nn.Sequential(nn.Linear(DIM, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN),
                         nn.GELU(), nn.Linear(HIDDEN, 1))


def _loss(model: nn.Module, batch) -> LossOutput:
    x, y = batch
    return LossOutput(nn.functional.mse_loss(model(x), y), x.shape[0])


def worker(run_dir: str, steps: int, batch_size: int, device: str) -> None:
    """Train for ``steps`` global steps (one epoch) and log samples/s to RUN/metrics.jsonl."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps * batch_size, DIM, generator=g)
    y = torch.sin(x[:, :1]) + 0.1 * x[:, 1:2]
    data = list(zip(x, y, strict=True))
    cfg = TrainConfig(epochs=1, batch_size=batch_size, lr=1e-3, device=device,
                      log_every_steps=steps, progress=False)
    Trainer(_model(), cfg, run_dir, train_dataset=data,
            collate_fn=lambda ex: tuple(torch.stack(t) for t in zip(*ex, strict=True)),
            loss_fn=_loss).fit()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(procs: int, run_dir: Path, args: argparse.Namespace) -> float:
    me = [str(Path(__file__).resolve()), "--worker", str(run_dir), "--steps", str(args.steps),
          "--batch-size", str(args.batch_size), "--device", args.device]
    if procs == 1:
        cmd = [sys.executable, *me]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={procs}",
               f"--master_port={_free_port()}", *me]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    subprocess.run(cmd, check=True, env=env)
    line = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    return line["samples_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=256, help="global batch size")
    p.add_argument("--device", default="cpu", help="cpu | auto (one GPU per process)")
    p.add_argument("--worker", metavar="RUN_DIR", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.batch_size, args.device)
        return
    with tempfile.TemporaryDirectory() as tmp:
        one = _run(1, Path(tmp) / "one", args)
        many = _run(args.procs, Path(tmp) / "many", args)
        a, b = _model(), _model()
        load_weights(a, Path(tmp) / "one" / "best.safetensors")
        load_weights(b, Path(tmp) / "many" / "best.safetensors")
        diff = max((pa - pb).abs().max().item()
                   for pa, pb in zip(a.parameters(), b.parameters(), strict=True))
    print(f"machine: {machine_line()}")
    print(f"{'processes':>10} {'samples/s':>12}")
    print(f"{1:>10} {one:>12.0f}")
    print(f"{args.procs:>10} {many:>12.0f}")
    print(f"overhead ratio (1-process / {args.procs}-process samples/s): {one / many:.2f}")
    print(f"final parameters agree within 1e-5: {diff <= 1e-5} (max abs diff {diff:.2e})")


if __name__ == "__main__":
    main()
