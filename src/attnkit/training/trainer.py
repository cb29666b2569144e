"""The one model-agnostic trainer: AdamW, schedules, early stopping, exact resume, DDP.

A step: rank ``r`` takes its share of the global batch ``batch_plan(epoch, seed)[i]``, runs
``loss_fn(model, batch)``, and the ranks sum ``loss * count`` and ``count`` in one all-reduce
(together with the stop flags, so every rank takes the same decision). Each rank's loss is
scaled by ``count_r * world / count_total`` before backward; DDP averages gradients over ranks,
so the gradient is exactly that of the mean over all ``count_total`` items, as in one process.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

# TrainingError lives with the other error types; importing it here keeps
# ``from attnkit.training.trainer import TrainingError`` working.
from attnkit.errors import TrainingError
from attnkit.fileio import atomic_write_text
from attnkit.training import distributed as D
from attnkit.training.checkpoint import load_checkpoint, save_checkpoint, save_weights
from attnkit.training.config import TrainConfig
from attnkit.training.schedule import apply_lr, lr_factor
from attnkit.training.seeding import get_rng_state, seed_everything, set_rng_state
from attnkit.training.signals import StopRequest


class LossOutput(NamedTuple):
    """What ``loss_fn`` returns: ``loss`` is the mean over ``count`` items of this batch
    (e.g. tokens or examples); ``count`` weights it when batches or ranks are combined."""

    loss: Tensor
    count: int | float | Tensor


@dataclass
class TrainResult:
    """How a ``fit`` ended. ``stop_reason``: completed | early_stopping | max_minutes | signal.

    ``best_metric``/``best_step``: the best ``select_metric`` and its step (None without
    evaluation); ``last_metrics``: the last evaluation's dict; ``signal``: e.g. ``"SIGTERM"``.
    """

    run_dir: Path
    stop_reason: str
    global_step: int
    epoch: int
    best_metric: float | None
    best_step: int | None
    last_metrics: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    signal: str | None = None


def default_batch_plan(num_examples: int, batch_size: int) -> Callable[[int, int], list]:
    """Shuffled chunks of ``batch_size`` (last one may be smaller), a pure fn of (epoch, seed)."""
    def plan(epoch: int, seed: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(num_examples, generator=g).tolist()
        return [order[i:i + batch_size] for i in range(0, num_examples, batch_size)]
    return plan


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; weight decay only on those with ``ndim >= 2``."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": g, "weight_decay": wd}
              for g, wd in ((decay, cfg.weight_decay), (rest, 0.0)) if g]
    # The fused kernel does the whole update in one pass: 6-8x faster than the default
    # (foreach) update for a 30k x 128 embedding on this CPU (benchmarked, same results).
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(groups, lr=cfg.lr, fused=fused)


def move_to_device(batch: Any, device: torch.device) -> Any:
    """Tensors inside (nested) tuples, lists, dicts and NamedTuples moved to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device) for v in batch)
    return batch


class _LossModule(nn.Module):
    """Runs ``loss_fn(model, batch)`` as a forward, so DDP syncs gradients whatever methods of
    the model ``loss_fn`` calls (the trick Lightning uses)."""

    def __init__(self, model: nn.Module, loss_fn: Callable) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch: Any) -> tuple[Tensor, Tensor]:
        out = self.loss_fn(self.model, batch)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Tensor)
                and out[0].dim() == 0):
            raise TypeError("loss_fn must return LossOutput(loss=scalar Tensor, count=number), "
                            f"got {type(out).__name__}")
        loss, count = out
        return loss, torch.as_tensor(count, dtype=torch.float64).detach()


def _finite_or_none(metrics: dict[str, Any]) -> dict[str, Any]:
    # metrics.jsonl must stay strict JSON: NaN/inf become null.
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in metrics.items()}


class Trainer:
    """Train ``model`` with ``loss_fn`` on ``train_dataset``; see docs/DEVELOPING.md.

    Args:
        model: any ``nn.Module``; moved to the run's device.
        cfg: :class:`TrainConfig`.
        run_dir: the run folder (``config.json``, ``metrics.jsonl``, ``best.safetensors``,
            ``last/``).
        train_dataset: indexable by int (``len`` and ``[i]``).
        collate_fn: ``list[example] -> batch`` (tensors in tuples/lists/dicts).
        loss_fn: ``(model, batch) -> LossOutput(loss, count)``; ``batch`` is on the device.
        evaluate_fn: ``(model) -> dict[str, float]`` containing ``cfg.select_metric``; runs on
            rank 0 in eval mode under ``no_grad``; the result is broadcast to all ranks.
        batch_plan: ``(epoch, seed) -> list[list[int]]`` global batches, a pure function.
        run_metadata: JSON-able dict merged into ``RUN/config.json`` (train config under
            ``"train"``).

    Call: ``fit(resume=False) -> TrainResult``; ``resume=True`` continues ``RUN/last`` exactly.

    Example:
        >>> trainer = Trainer(model, TrainConfig(epochs=2), "runs/x", train_dataset=data,
        ...                   collate_fn=collate, loss_fn=loss_fn, evaluate_fn=evaluate)
        >>> result = trainer.fit()
    """

    def __init__(self, model: nn.Module, cfg: TrainConfig, run_dir: str | Path, *,
                 train_dataset: Sequence | torch.utils.data.Dataset,
                 collate_fn: Callable[[list], Any],
                 loss_fn: Callable[[nn.Module, Any], LossOutput],
                 evaluate_fn: Callable[[nn.Module], dict[str, float]] | None = None,
                 batch_plan: Callable[[int, int], list[list[int]]] | None = None,
                 run_metadata: dict[str, Any] | None = None) -> None:
        cfg.validate()
        if cfg.early_stopping_patience is not None and evaluate_fn is None:
            raise ValueError("early_stopping_patience needs an evaluate_fn")
        self.model, self.cfg, self.run_dir = model, cfg, Path(run_dir)
        self.dataset, self.collate_fn, self.loss_fn = train_dataset, collate_fn, loss_fn
        self.evaluate_fn = evaluate_fn
        self.batch_plan = batch_plan or default_batch_plan(len(train_dataset), cfg.batch_size)
        self.run_metadata = dict(run_metadata or {})

    # ---------------------------------------------------------------- set-up helpers
    def _plan(self, epoch: int, world: int) -> list[list[int]]:
        plan = self.batch_plan(epoch, self.cfg.seed)
        n = len(self.dataset)
        for i, batch in enumerate(plan):
            if len(batch) < world:
                raise TrainingError(f"batch {i} of epoch {epoch} has {len(batch)} examples, "
                                    f"fewer than the {world} ranks; use a larger batch_size")
            if min(batch) < 0 or max(batch) >= n:
                raise TrainingError(f"batch {i} of epoch {epoch} indexes outside the dataset "
                                    f"(0..{n - 1})")
        return plan

    def _log(self, info: D.DistInfo, record: dict[str, Any]) -> None:
        if info.is_main:
            with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(_finite_or_none(record), allow_nan=False) + "\n")

    def _say(self, info: D.DistInfo, message: str) -> None:
        if info.is_main:
            print(f"[attnkit.training] {message}", file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- fit
    def fit(self, resume: bool = False) -> TrainResult:
        """Train (or continue ``RUN/last`` when ``resume``) until done; see :class:`TrainResult`.

        A fresh run (``resume=False``) empties ``metrics.jsonl`` and removes a stale ``last/``.
        """
        info = D.setup(self.cfg.device)
        try:
            return self._fit(info, resume)
        finally:
            D.teardown(info)

    def _fit(self, info: D.DistInfo, resume: bool) -> TrainResult:
        cfg, model = self.cfg, self.model
        model.to(info.device)
        model.train()
        optimizer = build_optimizer(model, cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_path = self.run_dir / "metrics.jsonl"
        pos: dict[str, Any] = {"epoch": 0, "batch": 0, "global_step": 0, "best": None,
                               "best_tiebreak": None, "best_step": None, "bad_evals": 0,
                               "last_metrics": {},
                               "last_eval_step": None, "elapsed": 0.0,
                               "window": [0.0, 0.0, 0]}
        if resume:
            state = load_checkpoint(self.run_dir / "last", model, optimizer)
            pos = state["position"]
            if len(state["rng"]) == info.world_size:
                set_rng_state(state["rng"][info.rank])
            else:
                self._say(info, f"checkpoint has RNG states of {len(state['rng'])} ranks, this "
                          f"run has {info.world_size}: reseeding (dropout draws will differ)")
                seed_everything(cfg.seed + pos["global_step"] * 1009 + info.rank)
            if info.is_main and metrics_path.exists():
                # Lines written after the checkpoint are about to be redone.
                with open(metrics_path, "r+b") as f:
                    f.truncate(state["metrics_bytes"])
        else:
            seed_everything(cfg.seed + info.rank)
            if info.is_main:
                metrics_path.write_text("")
                # A stale checkpoint of an earlier run here must never be resumed by mistake.
                for old in (self.run_dir / "last", self.run_dir / "last.prev"):
                    if old.is_dir():
                        shutil.rmtree(old)
        if info.is_main:
            atomic_write_text(self.run_dir / "config.json", json.dumps(
                {**self.run_metadata, "train": cfg.to_dict()}, indent=2))

        inner = torch.compile(model) if cfg.compile else model
        step_module: nn.Module = _LossModule(inner, self.loss_fn)
        if info.distributed:
            step_module = nn.parallel.DistributedDataParallel(
                step_module, device_ids=[info.device.index] if info.device.type == "cuda"
                else None, find_unused_parameters=cfg.find_unused_parameters)
        autocast = (torch.autocast(info.device.type, dtype=torch.bfloat16) if cfg.amp
                    else nullcontext())
        total_steps = cfg.epochs * len(self._plan(0, info.world_size))

        t_start = time.monotonic()
        elapsed0 = pos["elapsed"]
        window_t0 = t_start
        stop_reason: str | None = "completed" if pos["epoch"] >= cfg.epochs else None
        signal_name = None

        def elapsed() -> float:
            return elapsed0 + time.monotonic() - t_start

        def checkpoint() -> None:
            pos["elapsed"] = elapsed()
            rng = D.all_gather_json(get_rng_state(), info)
            if info.is_main:
                state = {"position": pos, "rng": rng, "world_size": info.world_size,
                         "scheduler": {"name": cfg.schedule, "step": pos["global_step"],
                                       "warmup_steps": cfg.warmup_steps,
                                       "total_steps": total_steps},
                         "scaler": None,  # bf16 autocast needs no gradient scaler
                         "metrics_bytes": metrics_path.stat().st_size,
                         "config": cfg.to_dict()}
                save_checkpoint(self.run_dir / "last", model, optimizer, state)

        with StopRequest() as stop:
            while stop_reason is None:
                epoch = pos["epoch"]
                plan = self._plan(epoch, info.world_size)
                if not plan:
                    raise TrainingError(f"batch_plan({epoch}, {cfg.seed}) returned no batches")
                shards = [D.shard(b, info.rank, info.world_size) for b in plan[pos["batch"]:]]
                loader = DataLoader(self.dataset, batch_sampler=shards,
                                    collate_fn=self.collate_fn, num_workers=cfg.num_workers,
                                    pin_memory=info.device.type == "cuda",
                                    generator=torch.Generator().manual_seed(cfg.seed))
                bar = _progress(cfg, info, len(plan), pos["batch"], epoch)
                for batch in loader:
                    batch = move_to_device(batch, info.device)
                    lr = apply_lr(optimizer, cfg.lr, lr_factor(
                        cfg.schedule, pos["global_step"], cfg.warmup_steps, total_steps))
                    error: BaseException | None = None
                    try:
                        with autocast:
                            loss, count = step_module(batch)
                        local = [float(loss.detach()) * float(count), float(count)]
                    except Exception as e:  # re-raised below, once every rank knows
                        error, local = e, [0.0, 0.0]
                    time_up = (cfg.max_minutes is not None
                               and time.monotonic() - t_start > cfg.max_minutes * 60)
                    tot = D.all_reduce_sum(local + [error is not None, stop.signum is not None,
                                                    time_up], info)
                    if error is not None:
                        raise error
                    if tot[2]:
                        raise TrainingError("another rank failed in loss_fn; see its log")
                    if tot[1] <= 0:
                        raise TrainingError(f"step {pos['global_step']}: loss_fn returned "
                                            "count 0 on every rank")
                    mean_loss = tot[0] / tot[1]
                    if not math.isfinite(mean_loss):
                        self._nonfinite(info, mean_loss, pos)
                    optimizer.zero_grad(set_to_none=True)
                    (loss * (float(count) * info.world_size / tot[1])).backward()
                    if cfg.grad_clip is not None:
                        norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                        if not math.isfinite(float(norm)):
                            self._nonfinite(info, float(norm), pos, what="gradient norm")
                    optimizer.step()

                    pos["global_step"] += 1
                    pos["batch"] += 1
                    step = pos["global_step"]
                    w = pos["window"]
                    w[0] += tot[0]
                    w[1] += tot[1]
                    w[2] += len(plan[pos["batch"] - 1])
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}")
                    if step % cfg.log_every_steps == 0:
                        now = time.monotonic()
                        self._log(info, {"kind": "train", "step": step, "epoch": epoch,
                                         "loss": w[0] / w[1], "lr": lr,
                                         "samples_per_s": w[2] / max(now - window_t0, 1e-9),
                                         "elapsed": elapsed()})
                        pos["window"], window_t0 = [0.0, 0.0, 0], now

                    if tot[3]:
                        stop_reason, signal_name = "signal", _signal_name(stop)
                    elif tot[4]:
                        stop_reason = "max_minutes"
                    end_of_epoch = pos["batch"] == len(plan)
                    is_last = end_of_epoch and epoch + 1 >= cfg.epochs
                    regular = (step % cfg.eval_every_steps == 0 if cfg.eval_every_steps
                               else end_of_epoch)
                    if self.evaluate_fn is not None and (
                            regular or is_last or stop_reason == "max_minutes"):
                        pos["elapsed"] = elapsed()
                        if self._evaluate(info, model, pos, autocast) and stop_reason is None:
                            stop_reason = "early_stopping"
                    if is_last and stop_reason is None:
                        stop_reason = "completed"
                    if end_of_epoch:
                        pos["epoch"], pos["batch"] = epoch + 1, 0
                    if (end_of_epoch or stop_reason is not None or (
                            cfg.checkpoint_every_steps
                            and step % cfg.checkpoint_every_steps == 0)):
                        checkpoint()
                    if stop_reason is not None:
                        break
                if bar is not None:
                    bar.close()

        if self.evaluate_fn is None and info.is_main:
            save_weights(model, self.run_dir / "best.safetensors",
                         {"step": pos["global_step"], "epoch": pos["epoch"], "metrics": {}})
        result = TrainResult(self.run_dir, stop_reason or "completed", pos["global_step"],
                             pos["epoch"], pos["best"], pos["best_step"],
                             dict(pos["last_metrics"]), elapsed(), signal_name)
        if stop_reason == "signal":
            self._say(info, f"stopped by {signal_name} after step {pos['global_step']}; "
                      f"checkpoint saved in {self.run_dir / 'last'}. Resume with "
                      f"--resume {self.run_dir} (Trainer.fit(resume=True)).")
        elif stop_reason in ("max_minutes", "early_stopping"):
            self._say(info, f"stopped ({stop_reason}) after step {pos['global_step']}; "
                      f"best {cfg.select_metric} = {pos['best']} at step {pos['best_step']}")
        return result

    # ---------------------------------------------------------------- evaluation
    def _evaluate(self, info: D.DistInfo, model: nn.Module, pos: dict[str, Any],
                  autocast: Any) -> bool:
        """Run evaluate_fn on rank 0, broadcast, update best/patience; True = stop early."""
        cfg = self.cfg
        payload: dict[str, Any] = {}
        failure: BaseException | None = None
        if info.is_main:
            model.eval()
            try:
                with torch.no_grad(), autocast:
                    metrics = {k: float(v) for k, v in self.evaluate_fn(model).items()}
                for key in (cfg.select_metric, cfg.select_tiebreak):
                    if key is not None and key not in metrics:
                        raise ValueError(f"evaluate_fn returned {sorted(metrics)}, which lacks "
                                         f"the selection key {key!r}")
                payload = {"metrics": metrics}
            except Exception as e:  # re-raised below, after the other ranks are told
                failure, payload = e, {"error": f"{type(e).__name__}: {e}"}
            finally:
                model.train()
        payload = D.broadcast_json(payload, info)
        if failure is not None:
            raise failure
        if "error" in payload:
            raise TrainingError(f"evaluate_fn failed on rank 0: {payload['error']}")
        metrics = payload["metrics"]
        step = pos["global_step"]
        pos["last_metrics"], pos["last_eval_step"] = metrics, step
        self._log(info, {"kind": "eval", "step": step, "epoch": pos["epoch"],
                         "elapsed": pos["elapsed"],
                         **{f"val_{k}": v for k, v in metrics.items()}})
        value = metrics[cfg.select_metric]
        tiebreak = metrics[cfg.select_tiebreak] if cfg.select_tiebreak is not None else None
        best, best_tiebreak = pos["best"], pos.get("best_tiebreak")  # absent in old checkpoints
        if not math.isfinite(value):
            better = False
        elif best is None:
            better = True
        elif value != best:
            better = value < best if cfg.select_mode == "min" else value > best
        else:  # an exact tie: the lower tie-break value wins, if there is one
            better = tiebreak is not None and math.isfinite(tiebreak) and (
                best_tiebreak is None or tiebreak < best_tiebreak)
        if better:
            pos["best"], pos["best_step"], pos["bad_evals"] = value, step, 0
            pos["best_tiebreak"] = tiebreak
            if info.is_main:
                save_weights(model, self.run_dir / "best.safetensors",
                             {"step": step, "epoch": pos["epoch"], "metrics": metrics})
        else:
            pos["bad_evals"] += 1
        patience = cfg.early_stopping_patience
        return patience is not None and pos["bad_evals"] >= patience

    def _nonfinite(self, info: D.DistInfo, value: float, pos: dict[str, Any],
                   what: str = "training loss") -> None:
        last = self.run_dir / "last"
        where = (f"the last good checkpoint {last} is kept" if last.exists()
                 else "no checkpoint was written yet")
        message = (f"non-finite {what} ({value}) at step {pos['global_step'] + 1} "
                   f"(epoch {pos['epoch']}); the run stops and {where}. Try a lower lr, "
                   "grad_clip, or warmup_steps.")
        self._say(info, message)
        raise TrainingError(message)


def _signal_name(stop: StopRequest) -> str:
    # Another rank may have caught the signal; report ours, or SIGTERM (what torchrun forwards).
    return stop.name or "SIGTERM"


def _progress(cfg: TrainConfig, info: D.DistInfo, total: int, initial: int, epoch: int):
    if not (cfg.progress and info.is_main and sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{cfg.epochs}",
                leave=False, dynamic_ncols=True)
