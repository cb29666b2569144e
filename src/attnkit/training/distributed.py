"""torchrun helpers: process group set-up, batch sharding and the few collectives the trainer uses.

Everything here also works in a single process (world size 1), where collectives are no-ops.
Objects travel as JSON bytes in uint8 tensors (never pickled).
"""

from __future__ import annotations

import datetime
import gc
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from attnkit.errors import TrainingError, UsageError


@dataclass
class DistInfo:
    """Where this process stands: ``rank`` of ``world_size``; ``device`` it computes on."""

    rank: int
    world_size: int
    device: torch.device
    created_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def is_main_process() -> bool:
    """True unless this is a non-zero rank under torchrun (``RANK`` set by the launcher).

    For application code around ``Trainer.fit``: only rank 0 writes run files and reports.
    """
    return int(os.environ.get("RANK", "0")) == 0


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``"auto"``: ``cuda:LOCAL_RANK`` when CUDA is present, else CPU; otherwise ``name``."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} requested but CUDA is not available")
        if device.index is None:
            device = torch.device("cuda", local_rank)
    return device


def checked_device(name: str | None, *, flag: str = "--device") -> str:
    """`resolve_device` of ``name`` (None: CPU) with its errors as one line naming ``flag``.

    Raises:
        UsageError: an unknown device, or CUDA asked for where there is none.
    """
    try:
        return str(resolve_device(name or "cpu"))
    except RuntimeError:
        raise UsageError(f"{flag} {name}: unknown device; use cpu, cuda, cuda:N or "
                         "auto") from None
    except ValueError as exc:
        raise UsageError(f"{flag} {name}: {exc}") from None


def setup(device_name: str, timeout_minutes: float = 60.0) -> DistInfo:
    """Join the torchrun process group when ``WORLD_SIZE > 1`` (gloo on CPU, NCCL on CUDA).

    Reuses a process group the caller already initialised. The long timeout leaves rank 0 time
    to evaluate while the other ranks wait.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = resolve_device(device_name, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    created = world > 1 and not dist.is_initialized()
    if created:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                timeout=datetime.timedelta(minutes=timeout_minutes))
    if dist.is_initialized():
        world, rank = dist.get_world_size(), dist.get_rank()
    return DistInfo(rank, world, device, created)


def teardown(info: DistInfo) -> None:
    """Destroy the process group if `setup` created it.

    A finished ``DistributedDataParallel`` wrapper lives in a reference cycle, and its reducer
    holds the group: left to itself, it is freed at interpreter exit, where the gloo group's
    threads then race the shutdown (a rank aborts). Collecting it first frees the group here.
    """
    if info.created_group and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
        info.created_group = False


def shard(indices: list[int], rank: int, world_size: int) -> list[int]:
    """Rank ``rank``'s contiguous share of one global batch (sizes differ by at most one)."""
    n = len(indices)
    return indices[rank * n // world_size:(rank + 1) * n // world_size]


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum a few float64 numbers over ranks (one collective)."""
    t = torch.tensor(values, dtype=torch.float64, device=_comm_device(info))
    if info.distributed:
        dist.all_reduce(t)
    return t.tolist()


def broadcast_json(obj: Any, info: DistInfo, src: int = 0) -> Any:
    """Send a JSON-able object from ``src`` to every rank (the others send ``null``); returns
    it on all ranks."""
    return all_gather_json(obj if info.rank == src else None, info)[src]


def all_gather_json(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's JSON-able object, in rank order, on every rank."""
    if not info.distributed:
        return [obj]
    device = _comm_device(info)
    payload = json.dumps(obj).encode()
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(info.world_size)]
    dist.all_gather(sizes, size)
    longest = max(int(s.item()) for s in sizes)
    buf = torch.zeros(longest, dtype=torch.uint8, device=device)
    buf[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    bufs = [torch.zeros_like(buf) for _ in range(info.world_size)]
    dist.all_gather(bufs, buf)
    return [json.loads(b[:int(s.item())].cpu().numpy().tobytes().decode())
            for b, s in zip(bufs, sizes, strict=True)]


T = TypeVar("T")


def run_on_main(info: DistInfo, action: Callable[[], T]) -> T | None:
    """``action()`` on rank 0 alone (a write, a preparation); every rank learns how it went.

    Returns ``action()``'s value on rank 0 and None elsewhere. If it raises on rank 0, rank 0
    re-raises it and every other rank raises `TrainingError` naming it,
    so no rank waits forever for a rank that failed.
    """
    result: T | None = None
    error: Exception | None = None
    if info.is_main:
        try:
            result = action()
        except Exception as e:  # re-raised below, after the other ranks are told
            error = e
    message = broadcast_json(None if error is None else f"{type(error).__name__}: {error}", info)
    if error is not None:
        raise error
    if message is not None:
        raise TrainingError(f"rank 0 failed: {message}")
    return result


def _comm_device(info: DistInfo) -> torch.device:
    # NCCL only moves CUDA tensors; gloo wants CPU ones.
    return info.device if info.device.type == "cuda" else torch.device("cpu")
