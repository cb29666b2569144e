"""Dynamic batching: the requests for one model gathered into one model call.

A `Gatherer` holds one model's queue. A request is admitted (`Gatherer.admit`) unless the
model already holds ``max_queue`` requests (429, with ``Retry-After``). The gathering loop
takes the oldest request, waits until the batch is full (``max_batch`` inputs) or that request
has waited ``max_wait_ms``, and hands the batch to the subclass (`Gatherer.dispatch`): one
call of the app's ``predict`` (`attnkit.server.batcher.Batcher`), or one greedy decoding
advanced a step at a time (`attnkit.server.streams.StreamBatcher`). Requests are never split;
only requests with the same options (a beam size, attention or not) share a batch, in arrival
order, the others waiting for the next. While a batch runs, the next one gathers, so under
load batches fill by themselves and an idle server answers a lone request after at most
``max_wait_ms``. A request whose client left, or whose deadline passed while it waited, is
dropped before it costs a model call.

Example:
    ```python
    class Echo(Gatherer):
        async def dispatch(self, batch):
            for job in batch:
                job.future.set_result(job.inputs)
                self.release(job)
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from attnkit.server.compute import Compute
from attnkit.server.errors import ApiError
from attnkit.server.metrics import Metrics

# Seconds a client is told to wait before retrying when a queue is full.
RETRY_AFTER_S = 1
log = logging.getLogger("attnkit.server")


@dataclass(eq=False)
class Job:
    """One request in a model's queue.

    Attributes:
        inputs: its inputs (texts, image files).
        options: the app options it asks for (its batch must share them).
        arrived: when it was admitted (the event loop's clock).
        future: resolved by the subclass (the results, or the start of a stream).
        events: a stream's events, in order (None for other requests).
        abandoned: its client left, or its deadline passed: nothing more is computed for it.
    """

    inputs: list[Any]
    options: dict[str, Any]
    arrived: float
    future: asyncio.Future
    events: asyncio.Queue | None = None
    abandoned: bool = False
    released: bool = field(default=False, repr=False)
    key: Hashable = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # What a batch must share: the options, as one comparable value.
        self.key = tuple(sorted(self.options.items()))


class Gatherer:
    """One model's queue and gathering loop (module docstring).

    Args:
        name: the run's name (metrics labels, messages).
        compute: the process's model thread.
        max_batch: the most inputs per batch (1: every request alone).
        max_wait_s: the longest a request waits for others.
        max_queue: the most requests admitted and not yet answered.
        metrics: where to count.
    """

    def __init__(self, name: str, compute: Compute, *, max_batch: int, max_wait_s: float,
                 max_queue: int, metrics: Metrics):
        self.name, self.compute, self.metrics = name, compute, metrics
        self.max_batch, self.max_wait_s, self.max_queue = max_batch, max_wait_s, max_queue
        self._pending: deque[Job] = deque()
        self._depth = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    @property
    def depth(self) -> int:
        """Requests admitted and not yet answered."""
        return self._depth

    def start(self) -> None:
        """Start gathering (on the running event loop)."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name=f"attnkit-gather-{self.name}")
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        # A loop that died of a bug would leave every later request to its deadline: say why.
        if not task.cancelled() and task.exception() is not None:
            log.error("the queue of run %s stopped", self.name, exc_info=task.exception())

    async def stop(self) -> None:
        """Stop gathering once the batch running now has been answered; requests still
        waiting are answered 503."""
        self._stopping = True
        if self._task is not None:
            self._wake.set()
            await self._task
        while self._pending:
            job = self._pending.popleft()
            if not job.future.done():
                job.future.set_exception(ApiError(503, "shutting_down",
                                                  "the server is shutting down"))

    def admit(self, inputs: Sequence[Any], options: dict[str, Any], *,
              stream: bool = False) -> Job:
        """Queue a request.

        Raises:
            ApiError: 429 with ``Retry-After`` when the model holds ``max_queue`` requests.
        """
        if self._wake is None or self._stopping:
            raise ApiError(503, "not_ready", "the server is starting or stopping")
        if self._depth >= self.max_queue:
            raise ApiError(429, "overloaded", f"run {self.name!r} holds {self._depth} requests "
                           f"(the limit is {self.max_queue}); retry later",
                           headers={"Retry-After": str(RETRY_AFTER_S)})
        loop = asyncio.get_running_loop()
        job = Job(list(inputs), dict(options), loop.time(), loop.create_future(),
                  asyncio.Queue() if stream else None)
        self._pending.append(job)
        self._depth += 1
        self.metrics.queue_depth.labels(self.name).set(self._depth)
        self._wake.set()
        return job

    def release(self, job: Job) -> None:
        """The request is answered (or given up): it leaves the queue's count."""
        if not job.released:
            job.released = True
            self._depth -= 1
            self.metrics.queue_depth.labels(self.name).set(self._depth)

    async def wait(self, job: Job, timeout: float) -> Any:
        """The job's future, or 503 when ``timeout`` seconds pass first (the job is then
        abandoned: if it still waits, it is never run).

        Raises:
            ApiError: 503 past the deadline.
        """
        def expire() -> None:
            if not job.future.done():
                job.abandoned = True
                job.future.set_exception(ApiError(
                    503, "deadline", f"no answer within the server's {timeout:g} s deadline; "
                    "retry later", headers={"Retry-After": str(RETRY_AFTER_S)}))

        # A timer on the future rather than asyncio.wait_for: no task per request.
        timer = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            return await job.future
        except asyncio.CancelledError:
            job.abandoned = True   # the client left
            raise
        finally:
            timer.cancel()

    async def dispatch(self, batch: list[Job]) -> None:
        """Run one batch (the subclass's): resolve each job's future (its submitter then
        `release` s it)."""
        raise NotImplementedError

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            while not self._live() and not self._stopping:
                self._wake.clear()
                await self._wake.wait()
            if self._stopping:
                return
            first = self._pending[0]
            until = first.arrived + self.max_wait_s
            while (self._inputs(first.key) < self.max_batch and loop.time() < until
                   and not self._stopping):
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), until - loop.time())
            batch = [] if self._stopping else self._take(first.key)
            if batch:
                await self.dispatch(batch)

    def _live(self) -> bool:
        """Drop the abandoned jobs at the head; whether one is left."""
        while self._pending and self._pending[0].abandoned:
            self.release(self._pending.popleft())
        return bool(self._pending)

    def _inputs(self, key: Hashable) -> int:
        return sum(len(j.inputs) for j in self._pending if j.key == key and not j.abandoned)

    def _take(self, key: Hashable) -> list[Job]:
        """The oldest jobs of ``key`` that fit one batch (the first always does)."""
        batch, kept, size, full = [], deque(), 0, False
        for job in self._pending:
            if job.abandoned:
                self.release(job)
                continue
            if job.key == key and not full:
                # First come, first served: once one does not fit, the later ones wait too.
                full = bool(batch) and size + len(job.inputs) > self.max_batch
                if not full:
                    batch.append(job)
                    size += len(job.inputs)
                    continue
            kept.append(job)
        self._pending = kept
        return batch
