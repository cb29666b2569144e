"""Keep freed memory for reuse: glibc's malloc settings for a process that allocates the same
large tensors every step.

By default glibc serves blocks above its mmap threshold with a fresh ``mmap`` and trims its
heap, so a training step that frees and reallocates the same activations pays a page fault on
every 4 KiB each step. `reuse_freed_memory` raises both thresholds with ``mallopt`` (the cost:
up to ``trim_threshold`` of freed memory kept); the ``attnkit`` command calls it at start.
Why and what it gains: docs/concepts.md ("Reusing freed memory"), docs/results.md.
"""

from __future__ import annotations

import ctypes
import platform

# mallopt parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The ceiling glibc's own threshold rises to on 64-bit systems: every block below it (all of a
# training step's tensors here) comes from the heap.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def reuse_freed_memory(*, mmap_threshold: int = MMAP_THRESHOLD,
                       trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Raise glibc's ``mmap_threshold`` and ``trim_threshold`` for this process: True when both took
    effect, False where the C library is not glibc or refused them (nothing changed then).
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success, 0 on error (e.g. a threshold above glibc's maximum).
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))
