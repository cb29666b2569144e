"""TrainConfig: every knob of a training run, as a plain dataclass with a JSON round trip.

Beside it, `checked_train_config`: options given on a command line, each error one line
naming its flag (an app's options become a TrainConfig in `attnkit.apps.results.AppSettings`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnkit.errors import UsageError
from attnkit.training.amp import AMP_CHOICES
from attnkit.training.distributed import checked_device

SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
# Budgets for which None is a value (no budget, never stop early), not "not given".
NONE_IS_A_VALUE = ("max_minutes", "early_stopping_patience")
_NONE_OR_POSITIVE = ("max_minutes", "grad_clip", "early_stopping_patience", "eval_every_steps",
                     "checkpoint_every_steps")


@dataclass
class TrainConfig:
    """Settings of one training run (written to ``RUN/config.json``).

    Args:
        epochs: passes over the training data.
        batch_size: the **global** batch size (examples per optimizer step over all ranks).
        lr: peak learning rate of AdamW.
        seed: fixes batch order (``batch_plan(epoch, seed)``) and the RNGs (rank ``r`` uses
            ``seed + r``).
        device: ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
            Under torchrun with CUDA each rank uses ``cuda:LOCAL_RANK``.
        max_minutes: wall-clock budget of one ``fit`` call; the run then stops cleanly (final
            evaluation + checkpoint). None = no budget.
        grad_clip: max global gradient norm (None = no clipping).
        weight_decay: AdamW decoupled weight decay, applied to parameters with ``ndim >= 2``
            (not to biases and norm scales).
        schedule: ``constant | linear | cosine | inverse_sqrt``, each after ``warmup_steps`` of
            linear warm-up.
        warmup_steps: optimizer steps of linear warm-up from ``lr / warmup_steps`` to ``lr``.
        early_stopping_patience: stop after this many evaluations without improvement of
            ``select_metric`` (None = never).
        select_metric: key of ``evaluate_fn``'s dict used for best checkpoint and early stopping.
        select_mode: ``"min"`` or ``"max"``.
        select_tiebreak: another key of ``evaluate_fn``'s dict, lower is better (a validation
            loss), that decides between evaluations whose ``select_metric`` is exactly equal
            (a saturating accuracy); None = ties keep the earlier checkpoint.
        eval_every_steps: evaluate every N optimizer steps (None = at the end of each epoch).
        checkpoint_every_steps: write ``RUN/last`` every N steps (always also at each epoch end
            and when the run stops).
        amp: bf16 autocast around ``loss_fn`` and ``evaluate_fn``: ``"auto"`` where bf16 is
            fast (`attnkit.training.amp`), ``True``/``"on"``, ``False``/``"off"``.
        compile: ``torch.compile`` the step: ``"on"``/True, ``"off"``/False, or ``"auto"``
            (`attnkit.training.compiling.resolve_compile`); a resume runs the way the run ran.
            ``RUN/config.json`` records both choices under ``"runtime"``.
        progress: tqdm progress bar (rank 0, only when stderr is a terminal).
        log_every_steps: write a train line to ``metrics.jsonl`` every N steps.
        num_workers: DataLoader worker processes for collation (0 = in the main process).
        find_unused_parameters: passed to DistributedDataParallel (models with parameters that
            some batches do not use).

    Example:
        >>> cfg = TrainConfig(epochs=3, batch_size=32, lr=1e-3)
        >>> TrainConfig.from_json(cfg.to_json()) == cfg
        True
    """

    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    device: str = "auto"
    max_minutes: float | None = None
    grad_clip: float | None = 1.0
    weight_decay: float = 0.0
    schedule: str = "constant"
    warmup_steps: int = 0
    early_stopping_patience: int | None = None
    select_metric: str = "loss"
    select_mode: str = "min"
    select_tiebreak: str | None = None
    eval_every_steps: int | None = None
    checkpoint_every_steps: int | None = None
    amp: bool | str = "auto"
    compile: bool | str = "auto"
    progress: bool = True
    log_every_steps: int = 50
    num_workers: int = 0
    find_unused_parameters: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field when a value is out of range."""
        def bad(name: str, rule: str) -> ValueError:
            return ValueError(f"TrainConfig.{name} must be {rule}, got {getattr(self, name)!r}")

        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        for name in ("epochs", "batch_size", "log_every_steps", "lr", *_NONE_OR_POSITIVE):
            value = getattr(self, name)
            if not (value is None and name in _NONE_OR_POSITIVE or number(value) and value > 0):
                raise bad(name, "a positive number")
        if not math.isfinite(self.lr):
            raise bad("lr", "finite")
        for name in ("warmup_steps", "weight_decay", "num_workers"):
            if not (number(getattr(self, name)) and getattr(self, name) >= 0):
                raise bad(name, "a number >= 0")
        for name, allowed in (("schedule", SCHEDULES), ("select_mode", ("min", "max"))):
            if getattr(self, name) not in allowed:
                raise bad(name, f"one of {allowed}")
        for name in ("amp", "compile"):
            if not isinstance(getattr(self, name), (bool, str)) or getattr(
                    self, name) not in AMP_CHOICES:
                raise bad(name, "'auto', 'on', 'off', True or False")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict; unknown keys raise ValueError (a typo must not pass silently)."""
        if not isinstance(data, dict):
            raise ValueError(f"TrainConfig must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig fields {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise ValueError("TrainConfig JSON is nested too deeply") from exc
        return cls.from_dict(data)


def checked_train_config(values: Mapping[str, Any]) -> TrainConfig:
    """A `TrainConfig` of ``values`` on a device this machine has
    (`attnkit.training.distributed.checked_device`).

    Raises:
        UsageError: a value it refuses, naming the option (``--lr must be ...``).
    """
    try:
        cfg = TrainConfig(**values)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UsageError(re.sub(r"TrainConfig\.([a-z]\w*)", lambda m: "--" + m[1].replace("_", "-"),
                                str(exc))) from None
    checked_device(cfg.device)
    return cfg
