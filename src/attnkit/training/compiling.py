"""Compiled training steps (``TrainConfig.compile``): what ``"auto"`` decides
(`resolve_compile`), and the `StepModule` that runs the step compiled by ``torch.compile``
(Inductor) or eagerly, the fallback of a failed compile. How sizes stay dynamic and why a
resumed process runs the same kernels: docs/concepts.md, "Compiled training steps".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attnkit.compiler import prepare_cache
from attnkit.errors import first_line

# ``"auto"`` compiles a model its app measured faster compiled only when the run is long
# enough to win back the compile (about a minute cold, seconds from Inductor's cache): at
# least this many steps, and no time budget below this many minutes.
AUTO_MIN_STEPS = 1000
AUTO_MIN_MINUTES = 10.0
# What builds the graphs: Inductor's generated code (tests swap in "aot_eager", the same graphs
# and autograd without generated code, where compile time is all they would measure).
BACKEND = "inductor"


def resolve_compile(value: bool | str, device: torch.device, *, pays: bool, steps: int,
                    max_minutes: float | None) -> bool:
    """Whether a run compiles its step: ``"on"``/True always, ``"off"``/False never;
    ``"auto"`` on a CPU when the app says its model trains faster compiled (``pays``) and the
    run plans at least `AUTO_MIN_STEPS` ``steps`` with no ``max_minutes`` budget below
    `AUTO_MIN_MINUTES`. A pure function of the settings: a seed keeps fixing a run."""
    if value != "auto":
        return value in (True, "on")
    long_enough = steps >= AUTO_MIN_STEPS and (max_minutes is None
                                               or max_minutes >= AUTO_MIN_MINUTES)
    return pays and device.type == "cpu" and long_enough


class CompileFailed(Exception):
    """A compiled call raised (``cause``): a failed compile, or an error of the step itself,
    which the same step run eagerly tells apart."""

    def __init__(self, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {first_line(cause)}")


class StepModule:
    """The step's module (``batch -> (loss, count)``), compiled with every size dynamic when
    ``compiled`` (at its first call), else eager; ``compiled`` says which runs now. What the
    compiled module raises is raised as `CompileFailed`."""

    def __init__(self, module: nn.Module, compiled: bool):
        self.eager = module
        self._compiled = torch.compile(module, dynamic=True, backend=BACKEND) if compiled else None

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def __call__(self, batch: Any) -> Any:
        if self._compiled is None:
            return self.eager(batch)
        return _run_compiled(lambda: _call_without_duck_sizing(self._compiled, batch))

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``; its compiled part may be compiled on this first call."""
        if self._compiled is None:
            loss.backward()
        else:
            _run_compiled(loss.backward)

    def fall_back(self) -> None:
        """Run eagerly from now on."""
        self._compiled = None


def _run_compiled(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # told apart by running the step eagerly (see CompileFailed)
        raise CompileFailed(exc) from exc


def _call_without_duck_sizing(module: nn.Module, batch: Any) -> Any:
    # Inductor's files go to the user's private cache; a cache that cannot be made (a full
    # disk) is a failed compile, not a crash.
    prepare_cache()
    # Duck sizing would give equal sizes of the first batch one symbol and guard on their
    # equality: the graphs made would then depend on the order the shapes came in.
    from torch.fx.experimental import _config as fx_config

    with fx_config.patch(use_duck_shape=False):
        return module(batch)
