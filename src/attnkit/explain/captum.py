"""Gradient attributions next to attention: gradient x input (Shrikumar et al. 2016) and
integrated gradients (Sundararajan et al. 2017) through Captum, an optional dependency
imported only when used (``pip install 'attnkit[explain]'``).

Both explain one output of ``forward(inputs, *args) -> [batch, outputs]`` (``target`` picks
it per row) by the inputs' vectors; integrated gradients add up to ``f(x) - f(baseline)``
up to the quadrature error they return."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from attnkit.errors import UsageError


def have_captum() -> bool:
    """Whether Captum is installed."""
    return importlib.util.find_spec("captum") is not None


def _captum():
    try:
        import captum.attr as attr
    except ImportError:
        raise UsageError("gradient attributions need Captum: pip install 'attnkit[explain]'"
                         ) from None
    return attr


def explain_methods(value: str | Iterable[str] | None, known: Iterable[str]) -> list[str]:
    """``--explain`` (or ``--methods``) as a list of methods among ``known``: comma-separated names
    or ``"all"``; None gives none. UsageError for an unknown name, or Captum missing for a
    gradient method."""
    if value is None:
        return []
    known = tuple(known)
    names = value.split(",") if isinstance(value, str) else list(value)
    names = list(known) if names == ["all"] else [n.strip() for n in names if n.strip()]
    for name in names:
        if name not in known:
            raise UsageError(f"--explain must be among {', '.join(known)} (or all), got "
                             f"{name!r}")
        if name not in ("attention", "rollout"):   # rollout is attention's own arithmetic
            _captum()
    return names


def grad_x_input(forward: Callable[..., Tensor], inputs: Tensor, *,
                 target: int | list[int] | None = None,
                 args: tuple[Any, ...] = (), max_rows: int | None = None) -> Tensor:
    """Gradient x input of ``forward(inputs, *args)[row, target[row]]``, shaped like
    ``inputs`` (Captum's ``InputXGradient``), ``max_rows`` rows a pass (None: all at once):
    the rows are independent, so passes bound the memory, not the result."""
    method = _captum().InputXGradient(forward)
    rows = inputs.shape[0]
    step = max(1, max_rows or rows)
    parts = []
    for start in range(0, max(rows, 1), step):
        part = slice(start, start + step)
        chunk = inputs[part].detach().requires_grad_(True)
        extra = tuple(a[part] if isinstance(a, Tensor) and a.ndim and a.shape[0] == rows
                      else a for a in args)
        aim = target[part] if isinstance(target, list) else target
        with torch.enable_grad():
            parts.append(method.attribute(chunk, target=aim,
                                          additional_forward_args=extra or None).detach())
    return torch.cat(parts)


def integrated_gradients(forward: Callable[..., Tensor], inputs: Tensor, *,
                         baselines: Tensor | None = None,
                         target: int | list[int] | None = None,
                         args: tuple[Any, ...] = (), steps: int = 32,
                         internal_batch_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Integrated gradients (Gauss-Legendre points) from ``baselines`` (zeros) to ``inputs`` ->
    ``(attributions like inputs, delta [batch])``: how far their sum is from ``f(x) - f(b)``."""
    method = _captum().IntegratedGradients(forward)
    inputs = inputs.detach().requires_grad_(True)
    with torch.enable_grad():
        attr, delta = method.attribute(
            inputs, baselines=baselines, target=target,
            additional_forward_args=args or None, n_steps=steps,
            internal_batch_size=internal_batch_size, return_convergence_delta=True)
    return attr.detach(), delta.detach()

