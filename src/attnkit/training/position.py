"""Where a run stands (`TrainPosition`): the part of ``RUN/last/state.json`` that makes a
resume exact."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from attnkit.errors import CheckpointError


@dataclass
class LossWindow:
    """Training loss and samples summed since ``start`` (run seconds, see ``elapsed``).

    Args:
        loss_sum: sum over steps of ``mean loss * count`` (all ranks).
        count: sum of ``count`` (the items the losses are means over, e.g. tokens).
        samples: examples trained on (global batch sizes).
        start: the run's ``elapsed`` when the window opened.
    """

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

    def to_list(self) -> list[float]:
        return [self.loss_sum, self.count, self.samples, self.start]


@dataclass
class TrainPosition:
    """The state of a run that a checkpoint restores (besides weights, optimizer and RNGs).

    Args:
        epoch: current epoch (0-based); ``batch``: next batch of its plan.
        global_step: optimizer steps done.
        best, best_tiebreak, best_step: the best ``select_metric`` so far, its tie-break value
            and its step (None before the first evaluation).
        bad_evals: evaluations in a row without improvement (early stopping).
        last_metrics, last_eval_step: the latest evaluation.
        elapsed: seconds of training over all ``fit`` calls (time between them not counted).
        window: train loss since the last ``metrics.jsonl`` train line.
        eval_window: train loss since the last evaluation (its ``train.log`` line).
        stopped: ``"completed"`` or ``"early_stopping"`` once the run has ended for good
            (None while it can go on: not started, stopped by a signal or the time budget).
        epochs_asked: the ``epochs`` it was given when it ended (a resume asking for more
            goes on).
        compiled: whether its steps run compiled (`attnkit.training.compiling`): a resume
            runs them the same way (None: not decided yet).
    """

    epoch: int = 0
    batch: int = 0
    global_step: int = 0
    best: float | None = None
    best_tiebreak: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    last_metrics: dict[str, float] = field(default_factory=dict)
    last_eval_step: int | None = None
    elapsed: float = 0.0
    window: LossWindow = field(default_factory=LossWindow)
    eval_window: LossWindow = field(default_factory=LossWindow)
    stopped: str | None = None
    epochs_asked: int = 0
    compiled: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (the ``"position"`` of ``state.json``)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["last_metrics"] = dict(self.last_metrics)
        data["window"] = self.window.to_list()
        data["eval_window"] = self.eval_window.to_list()
        return data

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
