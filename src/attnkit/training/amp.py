"""``TrainConfig.amp`` -> whether a run trains under bf16 autocast (`resolve_amp`).

``"auto"`` turns bf16 on only where it is fast: CUDA devices with bf16, and CPUs with native
bf16 dot products (AMX-BF16, AVX512-BF16). Elsewhere a CPU emulates bf16, far slower than
float32 (docs/DEVELOPING.md), so ``"auto"`` keeps float32 and an explicit ``True``/``"on"`` warns.
"""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext

import torch

from attnkit.machine import cpu_has_native_bf16

AMP_CHOICES = ("auto", "on", "off", True, False)


def resolve_amp(amp: bool | str, device: torch.device | str) -> bool:
    """True when a run with ``TrainConfig.amp = amp`` (one of `AMP_CHOICES`, as `TrainConfig`
    checked) on ``device`` uses bf16 autocast."""
    device = torch.device(device)
    if amp == "auto" and device.type == "cuda":
        # ROCm GPUs all do bf16; NVIDIA ones natively from Ampere (compute capability 8).
        return torch.cuda.is_available() and (
            bool(torch.version.hip) or torch.cuda.get_device_properties(device).major >= 8)
    if amp == "auto":
        return device.type == "cpu" and cpu_has_native_bf16()
    on = amp in (True, "on")
    if on and device.type == "cpu" and not cpu_has_native_bf16():
        warnings.warn("amp is on but this CPU has no native bf16 (no AMX-BF16 or AVX512-BF16): "
                      "bf16 autocast is much slower here than float32; amp='auto' would use "
                      "float32", RuntimeWarning, stacklevel=2)
    return on


def autocast(enabled: bool, device: torch.device) -> AbstractContextManager:
    """A fresh bf16 autocast context for ``device`` when ``enabled``, else a no-op one."""
    if not enabled:
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
