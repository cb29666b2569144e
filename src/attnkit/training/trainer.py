"""The one model-agnostic trainer (`Trainer`): AdamW, schedules, early stopping, exact resume, DDP.

Each rank runs ``loss_fn`` on its share of the global batch; one all-reduce sums ``loss *
count``, ``count`` and the stop flags; each rank's loss is scaled by ``count_r * world /
count_total``, so DDP's averaged gradient is that of the mean over all items, as in one process.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

# TrainingError lives with the other error types; importing it here keeps
# ``from attnkit.training.trainer import TrainingError`` working.
from attnkit.errors import CheckpointError, TrainingError
from attnkit.fileio import append_text, atomic_write_text, remove, truncate_file
from attnkit.machine import machine_info
from attnkit.training.amp import autocast, resolve_amp
from attnkit.training.checkpoint import (
    check_state_fits,
    checkpoint_folder,
    load_checkpoint,
    load_tensors,
    remove_stale_temporaries,
    save_checkpoint,
    save_weights,
)
from attnkit.training.compiling import CompileFailed, StepModule, resolve_compile
from attnkit.training.config import TrainConfig
from attnkit.training.distributed import (
    all_gather_json,
    all_reduce_sum,
    broadcast_json,
    run_on_main,
    setup,
    shard,
    teardown,
)
from attnkit.training.progress import Heartbeat, progress_bar, progress_line, say
from attnkit.training.run_folder import METRICS_LOG, check_checkpoint_files
from attnkit.training.seeding import get_rng_state, seed_everything, set_rng_state
from attnkit.training.signals import StopRequest


class LossOutput(NamedTuple):
    """What ``loss_fn`` returns: ``loss`` is the mean over ``count`` items of this batch
    (e.g. tokens or examples); ``count`` weights it when batches or ranks are combined."""

    loss: Tensor
    count: int | float | Tensor


@dataclass
class TrainResult:
    """How a ``fit`` ended: ``stop_reason`` completed | early_stopping | max_minutes | signal;
    the best ``select_metric`` and its step (None without evaluation); ``finished_before``: a
    resume found the run already ended for good (``stop_reason`` as it ended) and trained nothing.
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
    finished_before: bool = False


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
    groups = [{"params": g, "weight_decay": wd}
              for g, wd in (([p for p in params if p.dim() >= 2], cfg.weight_decay),
                            ([p for p in params if p.dim() < 2], 0.0)) if g]
    # The fused kernel does the whole update in one pass, with the same results.
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(groups, lr=cfg.lr, fused=fused)


def lr_factor(schedule: str, step: int, warmup_steps: int, total_steps: int) -> float:
    """Multiplier of the peak learning rate for optimizer step ``step`` (0-based): linear
    warm-up ``(step + 1) / warmup_steps``, then ``constant`` 1, ``linear`` to 0 at
    ``total_steps``, ``cosine`` ``0.5 (1 + cos(pi p))`` (``p``: the fraction of post-warm-up
    steps done), or ``inverse_sqrt`` ``sqrt(max(warmup_steps, 1) / (step + 1))``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "inverse_sqrt":
        return math.sqrt(max(warmup_steps, 1) / (step + 1))
    progress = min(max((step - warmup_steps) / max(total_steps - warmup_steps, 1), 0.0), 1.0)
    return 1.0 - progress if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))


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
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch: Any) -> tuple[Tensor, Tensor]:
        out = self.loss_fn(self.model, batch)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Tensor)
                and out[0].dim() == 0):
            raise TypeError("loss_fn must return LossOutput(loss=scalar Tensor, count=number), "
                            f"got {type(out).__name__}")
        return out[0], torch.as_tensor(out[1], dtype=torch.float64).detach()


@dataclass
class LossWindow:
    """Summed over all ranks since ``start`` (the run's ``elapsed``): ``mean loss * count``,
    ``count`` (e.g. tokens) and ``samples`` (examples)."""

    loss_sum: float = 0.0
    count: float = 0.0
    samples: int = 0
    start: float = 0.0

    def add(self, loss_sum: float, count: float, samples: int) -> None:
        self.loss_sum += loss_sum
        self.count += count
        self.samples += samples

    def mean_loss(self) -> float:
        return self.loss_sum / self.count if self.count > 0 else float("nan")

    def samples_per_s(self, now: float) -> float:
        """Throughput from ``start`` to ``now`` (both in run seconds)."""
        return self.samples / max(now - self.start, 1e-9)


@dataclass
class TrainPosition:
    """The state of a run that a checkpoint restores (besides weights, optimizer and RNGs).

    ``batch``: the next batch of epoch ``epoch``'s plan; ``best*``: the best ``select_metric``,
    its tie-break value and step; ``bad_evals``: evaluations in a row without improvement;
    ``elapsed``: training seconds over all fits; ``window``/``eval_window``: train loss since
    the last ``metrics.jsonl`` train line / evaluation; ``stopped``: completed or early_stopping
    once ended for good, with the ``epochs_asked`` then (more epochs go on); ``compiled``: how
    its steps run (a resume runs them the same way; None: not decided yet).
    """

    epoch: int = 0
    batch: int = 0
    global_step: int = 0
    best: float | None = None
    best_tiebreak: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    last_metrics: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    window: LossWindow = field(default_factory=LossWindow)
    eval_window: LossWindow = field(default_factory=LossWindow)
    stopped: str | None = None
    epochs_asked: int = 0
    compiled: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (the ``"position"`` of ``state.json``), the windows as lists."""
        return {**dataclasses.asdict(self), "window": dataclasses.astuple(self.window),
                "eval_window": dataclasses.astuple(self.eval_window)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainPosition:
        """Inverse of `to_dict`; CheckpointError when ``data`` is not a dict or has keys no
        version ever wrote."""
        if not isinstance(data, dict):
            raise CheckpointError(f"checkpoint position must be a JSON object, got "
                                  f"{type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise CheckpointError(f"checkpoint position has unknown fields {unknown}; written "
                                  "by a newer attnkit?")
        windows = {name: LossWindow(*data[name]) for name in ("window", "eval_window")
                   if name in data}
        return cls(**{**data, **windows})


class StepTotals(NamedTuple):
    """One step's numbers summed over the ranks in one all-reduce (so all decide alike)."""

    loss_sum: float  # sum of loss * count
    count: float
    failed: float  # ranks whose loss_fn raised
    signalled: float  # ranks that caught SIGINT/SIGTERM
    time_up: float  # ranks past max_minutes


class Trainer:
    """Train ``model`` with ``loss_fn`` on ``train_dataset`` into ``run_dir``; ``fit()`` ->
    `TrainResult`. The contract, each argument and an example: docs/DEVELOPING.md, "The trainer
    contract".

    Args:
        evaluate_fn: ``(model) -> dict[str, float]`` containing ``cfg.select_metric``; runs on
            rank 0 in eval mode under ``no_grad``; the result is broadcast to all ranks.
        batch_plan: ``(epoch, seed) -> list[list[int]]`` global batches, a pure function.
        next_stage: what the caller runs after training (``"the test evaluation"``), named
            in the progress line's time left.
        compile_pays: the app measured its model faster compiled (``compile="auto"``).
    """

    def __init__(self, model: nn.Module, cfg: TrainConfig, run_dir: str | Path, *,
                 train_dataset: Sequence | torch.utils.data.Dataset,
                 collate_fn: Callable[[list], Any],
                 loss_fn: Callable[[nn.Module, Any], LossOutput],
                 evaluate_fn: Callable[[nn.Module], dict[str, float]] | None = None,
                 batch_plan: Callable[[int, int], list[list[int]]] | None = None,
                 run_metadata: dict[str, Any] | None = None, next_stage: str | None = None,
                 compile_pays: bool = False) -> None:
        cfg.validate()
        if cfg.early_stopping_patience is not None and evaluate_fn is None:
            raise ValueError("early_stopping_patience needs an evaluate_fn")
        self.model, self.cfg, self.run_dir = model, cfg, Path(run_dir)
        self.dataset, self.collate_fn, self.loss_fn = train_dataset, collate_fn, loss_fn
        self.evaluate_fn, self.next_stage, self.compile_pays = evaluate_fn, next_stage, compile_pays
        self.batch_plan = batch_plan or default_batch_plan(len(train_dataset), cfg.batch_size)
        self.run_metadata = dict(run_metadata or {})

    # ---------------------------------------------------------------- fit
    def fit(self, resume: bool = False) -> TrainResult:
        """Train (or continue ``RUN/last`` exactly when ``resume``) until done.

        A fresh run empties ``metrics.jsonl`` and ``train.log`` and removes a stale ``last/``;
        a resume cuts ``metrics.jsonl`` back to the checkpoint. CheckpointError: no usable
        ``last/`` to resume, a corrupt ``best.safetensors``, a full disk; TrainingError: a
        non-finite loss, a failing rank, an unusable batch plan.
        """
        # What one fit works with lives on self from here: info, optimizer, step, amp,
        # total_steps, heartbeat and the clock (elapsed0: seconds of earlier fits, t0).
        self.info = info = setup(self.cfg.device)
        try:
            self.model.to(info.device)
            self.model.train()
            self.optimizer = build_optimizer(self.model, self.cfg)
            pos = self._resume() if resume else self._fresh_start()
            self.amp = resolve_amp(self.cfg.amp, info.device)
            self.total_steps = self.cfg.epochs * len(self._plan(0))
            if pos.compiled is None:   # a fresh run: decided once (a step that fails to
                # compile is redone eagerly, which ranks cannot agree on: one process only)
                pos.compiled = resolve_compile(
                    self.cfg.compile, info.device, pays=self.compile_pays,
                    steps=self.total_steps, max_minutes=self.cfg.max_minutes)
                if pos.compiled and info.distributed:
                    self._say("note: compiled training runs in one process; under torchrun "
                              "the step runs eagerly")
                    pos.compiled = False
            self._write_config(pos.compiled)
            budget = None if self.cfg.max_minutes is None else 60 * self.cfg.max_minutes
            self.heartbeat = Heartbeat(
                self.cfg.progress and info.is_main and not sys.stderr.isatty(),
                self.total_steps, budget_seconds=budget, next_stage=self.next_stage,
                evaluations=self._evaluations())
            step_module: nn.Module = _LossModule(self.model, self.loss_fn)
            if info.distributed:
                step_module = nn.parallel.DistributedDataParallel(
                    step_module, device_ids=[info.device.index]
                    if info.device.type == "cuda" else None,
                    find_unused_parameters=self.cfg.find_unused_parameters)
            self.step = StepModule(step_module, pos.compiled)
            self.elapsed0, self.t0 = pos.elapsed, time.monotonic()
            if resume and (pos.epoch >= self.cfg.epochs or (
                    pos.stopped == "early_stopping" and self.cfg.epochs <= pos.epochs_asked)):
                # The run had ended for good: there is nothing to train.
                return TrainResult(self.run_dir, pos.stopped or "completed", pos.global_step,
                                   pos.epoch, pos.best, pos.best_step, dict(pos.last_metrics),
                                   pos.elapsed, finished_before=True)
            return self._train(pos)
        finally:
            teardown(info)

    def _train(self, pos: TrainPosition) -> TrainResult:
        """Steps until a stop reason; each step may evaluate and checkpoint (`_after_step`)."""
        stop_reason = signal_name = None
        if pos.stopped == "early_stopping":   # asked for more epochs: patience starts again
            pos.stopped, pos.bad_evals = None, 0
        with StopRequest() as stop:
            while stop_reason is None:
                plan = self._plan(pos.epoch)
                if not plan:
                    raise TrainingError(f"batch_plan({pos.epoch}, {self.cfg.seed}) returned "
                                        "no batches")
                bar = progress_bar(self.cfg.progress and self.info.is_main, len(plan),
                                   pos.batch, pos.epoch, self.cfg.epochs)
                # This rank's share of each global batch left in the epoch, collated.
                shards = [shard(b, self.info.rank, self.info.world_size)
                          for b in plan[pos.batch:]]
                for batch in DataLoader(self.dataset, batch_sampler=shards,
                                        collate_fn=self.collate_fn,
                                        num_workers=self.cfg.num_workers,
                                        pin_memory=self.info.device.type == "cuda",
                                        generator=torch.Generator().manual_seed(self.cfg.seed)):
                    totals, lr = self._step(pos, batch, stop)
                    self._count_step(pos, totals, lr, len(plan[pos.batch]), bar)
                    # A signal first, then the time budget.
                    stop_reason = ("signal" if totals.signalled else
                                   "max_minutes" if totals.time_up else None)
                    stop_reason = self._after_step(pos, len(plan), stop_reason)
                    if stop_reason is not None:
                        break
                if bar is not None:
                    bar.close()
            # A signal after the last step's agreement (during the final evaluation or
            # checkpoint) leaves the run saved, but the caller must still hear of it.
            if stop.signum is not None or stop_reason == "signal":
                # Another rank may have caught it: ours, or SIGTERM (what torchrun forwards).
                stop_reason, signal_name = "signal", stop.name or "SIGTERM"
        return self._finish(pos, stop_reason, signal_name)

    def _elapsed(self) -> float:
        """Training seconds over every fit call."""
        return self.elapsed0 + time.monotonic() - self.t0

    # ---------------------------------------------------------------- set-up / resume
    def _fresh_start(self) -> TrainPosition:
        """Seed, empty the logs, and remove what an earlier run left here."""
        seed_everything(self.cfg.seed + self.info.rank)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.info.is_main:
            remove_stale_temporaries(self.run_dir)
            truncate_file(self.run_dir / METRICS_LOG, 0)
            truncate_file(self.run_dir / "train.log", 0)
            # A stale checkpoint of an earlier run here must never be resumed by mistake.
            for old in (self.run_dir / "last", self.run_dir / "last.prev"):
                remove(old)
        return TrainPosition()

    def _resume(self) -> TrainPosition:
        """Load ``RUN/last`` into the model and optimizer; restore RNGs and ``metrics.jsonl``."""
        info = self.info
        # Before anything is removed, read or moved: a checkpoint linked out of the run.
        check_checkpoint_files(self.run_dir)
        if info.is_main:
            remove_stale_temporaries(self.run_dir)
        checkpoint_folder(self.run_dir / "last")   # no checkpoint: the first error
        best = self.run_dir / "best.safetensors"
        if best.exists():   # corrupt or foreign: the resume would end with it still damaged
            try:
                check_state_fits(self.model.state_dict(), load_tensors(best)[0], best)
            except CheckpointError as e:
                raise CheckpointError(f"{e}; the run cannot be resumed with it: start it "
                                      "again with --overwrite (Trainer.fit(resume=False))") from e
        state = load_checkpoint(self.run_dir / "last", self.model, self.optimizer)
        pos = TrainPosition.from_dict(state["position"])
        if len(state["rng"]) == info.world_size:
            set_rng_state(state["rng"][info.rank])
        else:
            self._say(f"checkpoint has RNG states of {len(state['rng'])} ranks, this run has "
                      f"{info.world_size}: reseeding (dropout draws will differ)")
            seed_everything(self.cfg.seed + pos.global_step * 1009 + info.rank)
        metrics_path = self.run_dir / METRICS_LOG
        if info.is_main and os.path.lexists(metrics_path):
            # Lines written after the checkpoint are about to be redone.
            truncate_file(metrics_path, state["metrics_bytes"])
        return pos

    def _write_config(self, compiled: bool, compile_error: str | None = None) -> None:
        if self.info.is_main:
            runtime = {"amp_resolved": self.amp, "compile_resolved": compiled,
                       "device": str(self.info.device), "world_size": self.info.world_size,
                       "machine": machine_info(),
                       **({} if compile_error is None else {"compile_error": compile_error})}
            atomic_write_text(self.run_dir / "config.json", json.dumps(
                {**self.run_metadata, "train": self.cfg.to_dict(), "runtime": runtime},
                indent=2))

    def _plan(self, epoch: int) -> list[list[int]]:
        plan = self.batch_plan(epoch, self.cfg.seed)
        n, world = len(self.dataset), self.info.world_size
        for i, batch in enumerate(plan):
            if len(batch) < world:
                raise TrainingError(f"batch {i} of epoch {epoch} has {len(batch)} examples, "
                                    f"fewer than the {world} ranks; use a larger batch_size")
            if min(batch) < 0 or max(batch) >= n:
                raise TrainingError(f"batch {i} of epoch {epoch} indexes outside the dataset "
                                    f"(0..{n - 1})")
        return plan

    # ---------------------------------------------------------------- one step
    def _step(self, pos: TrainPosition, batch: Any,
              stop: StopRequest) -> tuple[StepTotals, float]:
        """`_update` at this step's lr; returns the totals and the lr. A compiled step that
        raises is redone eagerly from the same RNG state (docs/concepts.md)."""
        cfg = self.cfg
        batch = move_to_device(batch, self.info.device)
        lr = cfg.lr * lr_factor(cfg.schedule, pos.global_step, cfg.warmup_steps,
                                self.total_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        rng = get_rng_state() if self.step.compiled else None
        try:
            return self._update(pos, batch, stop), lr
        except CompileFailed as failed:
            set_rng_state(rng)
            self.optimizer.zero_grad(set_to_none=True)
            self.step.fall_back()
            totals = self._update(pos, batch, stop)
            pos.compiled = False
            if self.info.is_main:
                say(f"attnkit: warning: the training step could not be compiled ({failed}); "
                    "it runs eagerly, as with compile off")
            self._write_config(False, compile_error=str(failed))
            return totals, lr

    def _update(self, pos: TrainPosition, batch: Any, stop: StopRequest) -> StepTotals:
        """Forward, totals over the ranks, backward, clip and update."""
        cfg, info = self.cfg, self.info
        error: BaseException | None = None
        try:
            with autocast(self.amp, info.device):
                loss, count = self.step(batch)
            local = [float(loss.detach()) * float(count), float(count)]
        except Exception as e:  # re-raised below, once every rank knows
            error, local = e, [0.0, 0.0]
        minutes = (time.monotonic() - self.t0) / 60   # of this fit call, as max_minutes counts
        totals = StepTotals(*all_reduce_sum(
            [*local, error is not None, stop.signum is not None,
             minutes > (cfg.max_minutes or math.inf)], info))
        if error is not None:
            raise error
        if totals.failed:
            raise TrainingError("another rank failed in loss_fn; see its log")
        if totals.count <= 0:
            raise TrainingError(f"step {pos.global_step}: loss_fn returned count 0 on every "
                                "rank")
        mean_loss = totals.loss_sum / totals.count
        if not math.isfinite(mean_loss):
            self._nonfinite(mean_loss, pos)
        self.optimizer.zero_grad(set_to_none=True)
        self.step.backward(loss * (float(count) * info.world_size / totals.count))
        if cfg.grad_clip is not None:
            norm = nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            if not math.isfinite(float(norm)):
                self._nonfinite(float(norm), pos, what="gradient norm")
        self.optimizer.step()
        return totals

    def _count_step(self, pos: TrainPosition, totals: StepTotals, lr: float, samples: int,
                    bar: Any) -> None:
        """Advance the position by the step just done; the bar and the train log lines."""
        pos.global_step += 1
        pos.batch += 1
        for window in (pos.window, pos.eval_window):
            window.add(totals.loss_sum, totals.count, samples)
        now = self._elapsed()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{totals.loss_sum / totals.count:.4f}", lr=f"{lr:.2e}")
        else:
            self.heartbeat.tick(step=pos.global_step, epoch=pos.epoch, epochs=self.cfg.epochs,
                                samples_per_s=pos.eval_window.samples_per_s(now), elapsed=now)
        if pos.global_step % self.cfg.log_every_steps == 0:
            self._log({"kind": "train", "step": pos.global_step, "epoch": pos.epoch,
                       "loss": pos.window.mean_loss(), "lr": lr,
                       "samples_per_s": pos.window.samples_per_s(now), "elapsed": now})
            pos.window = LossWindow(start=now)

    def _after_step(self, pos: TrainPosition, num_batches: int,
                    stop_reason: str | None) -> str | None:
        """Evaluate, close the epoch and checkpoint as the step just done requires; ``stop_reason``
        (what the ranks asked for) -> the reason to stop now, or None."""
        cfg = self.cfg
        end_of_epoch = pos.batch == num_batches
        is_last = end_of_epoch and pos.epoch + 1 >= cfg.epochs
        regular = (pos.global_step % cfg.eval_every_steps == 0 if cfg.eval_every_steps
                   else end_of_epoch)
        if self.evaluate_fn is not None and (
                regular or is_last or stop_reason == "max_minutes"):
            pos.elapsed = self._elapsed()
            if self._evaluate(pos) and stop_reason is None:
                stop_reason = "early_stopping"
        if is_last and stop_reason is None:
            stop_reason = "completed"
        if stop_reason in ("completed", "early_stopping"):
            pos.stopped, pos.epochs_asked = stop_reason, cfg.epochs
        if end_of_epoch:
            pos.epoch, pos.batch = pos.epoch + 1, 0
        if (end_of_epoch or stop_reason is not None or (
                cfg.checkpoint_every_steps
                and pos.global_step % cfg.checkpoint_every_steps == 0)):
            self._checkpoint(pos)
        return stop_reason

    def _evaluations(self) -> Callable[[int, int], int] | None:
        """``(step, epoch) -> validations still to run`` (that step's included) as `_after_step`
        runs them; None without ``evaluate_fn``."""
        if self.evaluate_fn is None:
            return None
        every, epochs, total = self.cfg.eval_every_steps, self.cfg.epochs, self.total_steps
        if every:
            return lambda step, _: (total // every - (step - 1) // every
                                    + (1 if total % every else 0))
        return lambda _, epoch: epochs - epoch

    def _checkpoint(self, pos: TrainPosition) -> None:
        """Write ``RUN/last`` (rank 0); every rank raises if it failed (e.g. a full disk)."""
        pos.elapsed = self._elapsed()
        rng = all_gather_json(get_rng_state(), self.info)
        state = {"position": pos.to_dict(), "rng": rng, "world_size": self.info.world_size,
                 "config": self.cfg.to_dict()}
        run_on_main(self.info, lambda: save_checkpoint(
            self.run_dir / "last", self.model, self.optimizer,
            {**state, "metrics_bytes": (self.run_dir / METRICS_LOG).stat().st_size}))

    # ---------------------------------------------------------------- evaluation
    def _evaluate(self, pos: TrainPosition) -> bool:
        """Run evaluate_fn on rank 0, broadcast, update best/patience; True = stop early."""
        cfg, step = self.cfg, pos.global_step

        def evaluate() -> dict[str, float]:   # on rank 0 in eval mode; its dict on every rank
            self.model.eval()
            try:
                with torch.no_grad(), autocast(self.amp, self.info.device):
                    metrics = {k: float(v) for k, v in self.evaluate_fn(self.model).items()}
            finally:
                self.model.train()
            for key in (cfg.select_metric, cfg.select_tiebreak):
                if key is not None and key not in metrics:
                    raise ValueError(f"evaluate_fn returned {sorted(metrics)}, which lacks the "
                                     f"selection key {key!r}")
            return metrics
        start = time.monotonic()
        metrics = broadcast_json(run_on_main(self.info, evaluate), self.info)
        self.heartbeat.validated(time.monotonic() - start)
        pos.last_metrics = metrics
        self._log({"kind": "eval", "step": step, "epoch": pos.epoch, "elapsed": pos.elapsed,
                   **{f"val_{k}": v for k, v in metrics.items()}})
        now = self._elapsed()
        if self.info.is_main:   # the evaluation's line on stderr and in RUN/train.log
            line = progress_line(step=step, epoch=pos.epoch, epochs=cfg.epochs,
                                 train_loss=pos.eval_window.mean_loss(),
                                 samples_per_s=pos.eval_window.samples_per_s(now),
                                 elapsed=now, metrics=metrics)
            append_text(self.run_dir / "train.log", line + "\n")
            self._say(line)
        pos.eval_window = LossWindow(start=now)
        value = metrics[cfg.select_metric]
        tiebreak = metrics[cfg.select_tiebreak] if cfg.select_tiebreak is not None else None
        if self._is_better(value, tiebreak, pos):
            pos.best, pos.best_tiebreak, pos.best_step, pos.bad_evals = value, tiebreak, step, 0
            run_on_main(self.info, lambda: save_weights(
                self.model, self.run_dir / "best.safetensors",
                {"step": step, "epoch": pos.epoch, "metrics": metrics}))
        else:
            pos.bad_evals += 1
        return (cfg.early_stopping_patience is not None
                and pos.bad_evals >= cfg.early_stopping_patience)

    def _is_better(self, value: float, tiebreak: float | None, pos: TrainPosition) -> bool:
        """Does an evaluation with ``select_metric = value`` beat ``pos.best``?"""
        best = pos.best
        if best is None or not math.isfinite(value):
            return math.isfinite(value)
        if value != best:
            return value < best if self.cfg.select_mode == "min" else value > best
        # An exact tie: the lower tie-break value wins, if there is one.
        return tiebreak is not None and math.isfinite(tiebreak) and (
            pos.best_tiebreak is None or tiebreak < pos.best_tiebreak)

    # ---------------------------------------------------------------- the end
    def _finish(self, pos: TrainPosition, stop_reason: str,
                signal_name: str | None) -> TrainResult:
        """Final weights without evaluate_fn, the result, and what to tell the user."""
        if self.evaluate_fn is None:
            run_on_main(self.info, lambda: save_weights(
                self.model, self.run_dir / "best.safetensors",
                {"step": pos.global_step, "epoch": pos.epoch, "metrics": {}}))
        if stop_reason == "signal":
            self._say(f"stopped by {signal_name} after step {pos.global_step}; checkpoint "
                      f"saved in {self.run_dir / 'last'}. Resume with --resume {self.run_dir} "
                      "(Trainer.fit(resume=True)).")
        elif stop_reason in ("max_minutes", "early_stopping"):
            self._say(f"stopped ({stop_reason}) after step {pos.global_step}; best "
                      f"{self.cfg.select_metric} = {pos.best} at step {pos.best_step}")
        return TrainResult(self.run_dir, stop_reason, pos.global_step, pos.epoch, pos.best,
                           pos.best_step, dict(pos.last_metrics), self._elapsed(), signal_name)

    # ---------------------------------------------------------------- messages
    def _log(self, record: dict[str, Any]) -> None:
        if self.info.is_main:   # metrics.jsonl stays strict JSON: NaN/inf become null
            record = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                      for k, v in record.items()}
            append_text(self.run_dir / METRICS_LOG, json.dumps(record, allow_nan=False) + "\n")

    def _say(self, message: str) -> None:
        if self.info.is_main:
            say(f"[attnkit.training] {message}")

    def _nonfinite(self, value: float, pos: TrainPosition, what: str = "training loss") -> None:
        last = self.run_dir / "last"
        where = (f"the last good checkpoint {last} is kept" if last.exists()
                 else "no checkpoint was written yet")
        message = (f"non-finite {what} ({value}) at step {pos.global_step + 1} "
                   f"(epoch {pos.epoch}); the run stops and {where}. Try a lower lr, "
                   "grad_clip, or warmup_steps.")
        self._say(message)
        raise TrainingError(message)
