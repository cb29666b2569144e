"""Continuous batching on the model thread: the requests for one model answered together.

One thread per process runs every model call (`ModelThread`): the event loop stays free to
accept, parse and answer while a model works, and torch's ``--threads`` are all the cores the
process spends on models, whatever the number of requests. Each run has a `Batcher` (its plain
routes) and, for a streaming translator, a `attnkit.server.streams.StreamBatcher`; both are
`Gatherer` s.

A request is admitted unless its model already holds ``max_queue`` requests (429 with
``Retry-After``). When the model thread is free, the gatherer takes the oldest request and,
in arrival order, every later one with the same options (a beam size, attention or not) that
fits ``max_batch`` inputs; requests are never split. So a lone request is decoded at once, and
requests that arrive while the thread is busy gather and go as one batch the moment it frees.
``max_wait_ms`` (0 by default) may hold a request that long for others to join it. A request
whose client left, or whose deadline passed while it waited, is dropped before it costs a call.
An input the app refuses fails the whole call, so such a batch is run again request by
request: only the request that holds the bad input gets the error (422).

Example:
    ```python
    batcher = Batcher("fr", predict, ModelThread(), max_batch=64, max_wait_s=0,
                      max_queue=512, metrics=metrics)
    batcher.start()
    predictions = await batcher.submit(["I am cold."], {"beam": 1}, timeout=30)
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from attnkit.errors import AttnkitError
from attnkit.server.errors import ApiError
from attnkit.server.prometheus import Metrics

T = TypeVar("T")
# Seconds a client is told to wait before retrying when a queue is full.
RETRY_AFTER_S = 1
log = logging.getLogger("attnkit.server")


class ModelThread:
    """The process's one model thread, and ``turn``: the lock a gatherer holds while its
    model call runs, so that the next batch is taken only once the thread is free."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnkit-model")
        self.turn = asyncio.Lock()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the model thread, awaited."""
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, functools.partial(fn, *args))

    def close(self) -> None:
        """Finish the calls already given, then stop the thread."""
        self._pool.shutdown(wait=True)


@dataclass(eq=False)
class Job:
    """One request in a model's queue: its inputs and options, when it arrived (the loop's
    clock), the future its answer resolves, a stream's ``events`` queue (None for other
    requests), and whether it was ``abandoned`` (its client left or its deadline passed)."""

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
    """One model's queue and gathering loop (module docstring); a subclass runs a batch
    (`dispatch`)."""

    def __init__(self, name: str, thread: ModelThread, *, max_batch: int, max_wait_s: float,
                 max_queue: int, metrics: Metrics):
        self.name, self.thread, self.metrics = name, thread, metrics
        self.max_batch, self.max_wait_s, self.max_queue = max_batch, max_wait_s, max_queue
        self._pending: deque[Job] = deque()
        self.depth = 0   # requests admitted and not yet answered
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

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
        """Stop once the batch running now is answered; requests still waiting get 503."""
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
            ApiError: 429 with ``Retry-After`` when the model holds ``max_queue`` requests;
                503 when the queue is not running.
        """
        if self._wake is None or self._stopping:
            raise ApiError(503, "not_ready", "the server is starting or stopping")
        if self.depth >= self.max_queue:
            raise ApiError(429, "overloaded", f"run {self.name!r} holds {self.depth} requests "
                           f"(the limit is {self.max_queue}); retry later",
                           headers={"Retry-After": str(RETRY_AFTER_S)})
        loop = asyncio.get_running_loop()
        job = Job(list(inputs), dict(options), loop.time(), loop.create_future(),
                  asyncio.Queue() if stream else None)
        self._pending.append(job)
        self.depth += 1
        self.metrics.queue_depth.labels(self.name).set(self.depth)
        self._wake.set()
        return job

    def release(self, job: Job) -> None:
        """The request is answered (or given up): it leaves the queue's count."""
        if not job.released:
            job.released = True
            self.depth -= 1
            self.metrics.queue_depth.labels(self.name).set(self.depth)

    async def wait(self, job: Job, timeout: float) -> Any:
        """The job's future, or 503 when ``timeout`` seconds pass first (the job is then
        abandoned: if it still waits, it never runs).

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
        """Run one batch, the model thread's turn held: resolve each job's future (its
        submitter then `release` s it)."""
        raise NotImplementedError

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            if not self._live():
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self._pending[0]
            until = first.arrived + self.max_wait_s
            while (self._inputs(first.key) < self.max_batch and loop.time() < until
                   and not self._stopping):
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), until - loop.time())
            async with self.thread.turn:
                # Taken now that the thread is free: all that gathered meanwhile goes along.
                if self._live() and not self._stopping:
                    await self.dispatch(self._take(self._pending[0].key))

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


class Batcher(Gatherer):
    """The batches of a run's plain routes: one ``predict(inputs, options)`` call on the model
    thread for the inputs of all its requests, each request getting its own slice back."""

    def __init__(self, name: str, predict: Callable[[list[Any], dict[str, Any]], list[Any]],
                 thread: ModelThread, **kwargs: Any):
        super().__init__(name, thread, **kwargs)
        self.predict = predict

    async def submit(self, inputs: Sequence[Any], options: dict[str, Any],
                     timeout: float) -> list[Any]:
        """The results of ``inputs`` (one per input), computed in a batch with others.

        Raises:
            ApiError: 429 (queue full), 503 (past ``timeout`` seconds).
            AttnkitError: an input the app refuses.
        """
        job = self.admit(inputs, options)
        try:
            return await self.wait(job, timeout)
        finally:
            self.release(job)

    async def dispatch(self, batch: list[Job]) -> None:
        start = time.perf_counter()
        try:
            outcomes = await self.thread.run(self._outcomes, batch)
        except Exception as exc:  # a failure of the server itself: every request learns it
            outcomes = [exc] * len(batch)
        self.metrics.batch_size.labels(self.name).observe(sum(len(j.inputs) for j in batch))
        self.metrics.batch_seconds.labels(self.name).observe(time.perf_counter() - start)
        for job, outcome in zip(batch, outcomes, strict=True):
            if job.future.done() or job.abandoned:
                continue
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)

    def _outcomes(self, batch: list[Job]) -> list[list[Any] | AttnkitError]:
        """On the model thread: the results of each job, or the error of its own inputs."""
        try:
            results = self.predict([x for job in batch for x in job.inputs], batch[0].options)
        except AttnkitError as exc:
            return [exc] if len(batch) == 1 else [self._alone(job) for job in batch]
        out, at = [], 0
        for job in batch:
            out.append(results[at:at + len(job.inputs)])
            at += len(job.inputs)
        return out

    def _alone(self, job: Job) -> list[Any] | AttnkitError:
        try:
            return self.predict(job.inputs, job.options)
        except AttnkitError as exc:
            return exc
