"""Keep freed memory for reuse: glibc's malloc settings for a process that allocates the same
large tensors every step.

PyTorch's CPU tensors come from the C library's ``malloc``. glibc serves a block above its
mmap threshold (128 KiB at first, rising on its own up to 32 MiB) with a fresh ``mmap`` and
unmaps it on ``free``; it also hands the top of its heap back to the system once more than
the trim threshold is free. A training step allocates and frees the same activations and
gradients every step (the 2018 sentiment model: a dense 15 MB embedding gradient, 20 MB of
attention scores), so by default every step maps fresh pages and pays a page fault on each
4 KiB of them before it computes anything. `reuse_freed_memory` raises both thresholds with
``mallopt``: large blocks then come from the heap and freed ones are reused by the next step.

What it gains: docs/results.md ("Training speed against Keras"). The cost is that the process
keeps up to ``trim_threshold`` of freed memory instead of returning it.

The ``attnkit`` command calls it at start; from Python, call it once before training, or start
the interpreter with the equivalent ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:
glibc.malloc.trim_threshold=1073741824``. On a C library other than glibc (macOS, musl) it does
nothing.

Example:
    ```python
    from attnkit.allocator import reuse_freed_memory
    reuse_freed_memory()      # True on glibc
    ```
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
    """Raise glibc's mmap and trim thresholds for this process (module doc).

    Args:
        mmap_threshold: blocks smaller than this come from the heap.
        trim_threshold: free memory the heap keeps before returning any to the system.

    Returns:
        True when both settings took effect; False where the C library is not glibc or
        refused them (nothing is changed then).
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
