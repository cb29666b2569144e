"""What this machine is: CPU model, vector ISA, native bf16, threads, torch, GPU.

Every timing the project reports carries `machine_line`, and ``amp="auto"`` asks
`cpu_has_native_bf16` whether bf16 autocast pays off on the CPU; `torch_threads` sets torch's
CPU threads for a while. Bottom layer: imports only the standard library, torch and
`attnkit.errors` / `attnkit.settings`.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from attnkit.errors import UsageError
from attnkit.settings import is_int

CPUINFO = Path("/proc/cpuinfo")
# CPU flags (as Linux names them) of bf16 dot-product instructions that oneDNN uses for matmul.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# torch.cpu probes of the same (private API: looked up by name, absent in some versions).
_TORCH_BF16_PROBES = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
# ONEDNN_MAX_CPU_ISA values that keep oneDNN (torch's CPU matmul) off its bf16 instructions.
_ONEDNN_ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                             "AVX512_CORE_VNNI")
# Variables that make torch (ATen, oneDNN, MKL) or CTranslate2 run a lower ISA than the CPU has:
# a timing taken under them emulates an older CPU, and its machine line has to say so.
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
            "CT2_FORCE_CPU_ISA")


def _cpuinfo(key: str) -> str | None:
    """The value of the first ``key : value`` line of /proc/cpuinfo, or None (also off Linux)."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux, or /proc not mounted: callers fall back to platform
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return None


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bf16 dot products natively (AVX512-BF16 or AMX-BF16), where bf16
    autocast pays; elsewhere torch emulates bf16, many times slower than float32.

    torch's probes first (they know whether the OS allows AMX), then /proc/cpuinfo;
    ``ONEDNN_MAX_CPU_ISA`` below AVX512_CORE_BF16 counts as no.
    """
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _ONEDNN_ISAS_WITHOUT_BF16:
        return False
    probes = [p for p in (getattr(torch.cpu, n, None) for n in _TORCH_BF16_PROBES) if callable(p)]
    if probes:
        return any(bool(probe()) for probe in probes)
    return bool(set((_cpuinfo("flags") or "").split()) & set(BF16_FLAGS))


def cpu_model() -> str:
    """The CPU's marketing name (``model name`` of /proc/cpuinfo), else what platform knows."""
    name = _cpuinfo("model name")
    return name or platform.processor() or platform.machine() or "unknown CPU"


def machine_info() -> dict[str, Any]:
    """The facts a benchmark figure needs, as a JSON-able dict: ``cpu``, ``isa``,
    ``bf16_native``, ``threads``, ``torch``, ``cuda`` (device name or None) and ``isa_caps``.
    """
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    caps = {name: os.environ[name] for name in ISA_CAPS if os.environ.get(name)}
    return {"cpu": cpu_model(), "isa": torch.backends.cpu.get_cpu_capability(),
            "bf16_native": cpu_has_native_bf16(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "cuda": cuda, "isa_caps": caps}


def machine_line(info: dict[str, Any] | None = None) -> str:
    """One line describing the machine (``info``: a `machine_info` dict; None = this one).

    Example:
        >>> machine_line({"cpu": "Intel(R) Xeon(R) Processor", "isa": "AVX512",
        ...               "bf16_native": True, "threads": 2, "torch": "2.13.0+cpu",
        ...               "cuda": None})
        'Intel(R) Xeon(R) Processor (AVX512, bf16 native: yes), 2 threads, torch 2.13.0+cpu'
    """
    info = machine_info() if info is None else info
    bf16 = "yes" if info["bf16_native"] else "no"
    line = (f"{info['cpu']} ({info['isa']}, bf16 native: {bf16}), {info['threads']} "
            f"thread{'' if info['threads'] == 1 else 's'}, torch {info['torch']}")
    if info.get("cuda"):
        line += f", CUDA: {info['cuda']}"
    if info.get("isa_caps"):
        line += ", ISA capped by " + " ".join(f"{k}={v}" for k, v in info["isa_caps"].items())
    return line


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` while inside (None: unchanged); UsageError below 1."""
    if threads is None:
        yield
        return
    if not is_int(threads) or threads < 1:
        raise UsageError(f"--threads must be at least 1, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
