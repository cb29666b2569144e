"""Where the models run: one thread per server process, off the event loop.

Every model call (a batch of translations, a step of the streams, a page) is a job for this
one thread, so the event loop stays free to accept, parse and answer while a model works, and
the process never runs two model calls at once: torch's ``threads`` intra-op threads are all
the cores one process uses for models, whatever the number of requests. Jobs of different
models take turns; a batch is bounded (``max_batch``), and streams advance one decoder step
per job, so no request holds the thread for long.

Example:
    ```python
    compute = Compute()
    result = await compute.run(model_call, batch)
    compute.close()
    ```
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def set_threads(threads: int) -> None:
    """torch's intra-op threads for this process (``--threads``), and one inter-op thread (the
    compute thread runs one job at a time: nothing to run beside it)."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already fixed in this process (torch allows it once, before any parallel work)


class Compute:
    """The process's model thread (module docstring)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnkit-compute")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the model thread, awaited."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Finish the jobs already given, then stop the thread."""
        self._pool.shutdown(wait=True)
