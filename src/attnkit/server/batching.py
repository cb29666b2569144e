"""Continuous batching on the model thread: the requests for one model answered together.

One thread per process runs every model call (`ModelThread`): the event loop stays free, and
torch's ``--threads`` are all the cores the process spends on models. When the thread is free,
a `Gatherer` takes the oldest request and, in arrival order, every later one with the same
options that fits ``max_batch`` inputs (never splitting one): a lone client's request runs at
once, and those that come while the thread is busy go together the moment it frees, joined by
the clients the last call answered if they return within a quarter of that call's time
(`Gatherer._await_returning`; streams never wait so). ``max_wait_ms`` (0 by default) may
hold a request for company. A request whose client left or whose deadline passed is dropped
before it costs a call. `Batcher` answers a batch with one ``predict`` call; if an input fails
it, each request runs alone and only the bad one gets the error. `StreamBatcher` decodes a
batch of streams one step per turn of the thread, so batches and other streams take turns with
it step by step.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from attnkit.errors import AttnkitError
from attnkit.server.errors import ApiError
from attnkit.server.prometheus import Metrics

RETRY_AFTER = {"Retry-After": "1"}   # seconds, when a queue is full or a deadline passed
log = logging.getLogger("attnkit.server")


class ModelThread:
    """The process's model thread; ``turn`` is held while a model call runs, so that the next
    batch is taken once the thread is free."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnkit-model")
        self.turn = asyncio.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass(eq=False)
class Job:
    """One request: its inputs, its options (its batch shares them), when it came, the future
    of its answer, a stream's events, whether it was abandoned (it then never runs)."""

    inputs: list[Any]
    options: dict[str, Any]
    arrived: float
    future: asyncio.Future
    events: asyncio.Queue | None = None
    abandoned: bool = False
    key: Hashable = field(init=False)

    def __post_init__(self) -> None:
        self.key = tuple(sorted(self.options.items()))


@dataclass
class Answered:
    """The last batch's answers: when they went out (event-loop time), to how many requests,
    the arrival count then, and how long the next batch may wait for those clients to return
    (a quarter of that batch's own time: the model never idles waiting for longer than a
    quarter of the time it just decoded)."""

    at: float = 0.0
    requests: int = 0
    arrivals: int = 0
    window: float = 0.0


class Gatherer:
    """One model's queue and gathering loop; a subclass runs a batch (`dispatch`)."""

    def __init__(self, name: str, thread: ModelThread, *, max_batch: int, max_wait_s: float,
                 max_queue: int, metrics: Metrics):
        self.name, self.thread, self.metrics = name, thread, metrics
        self.max_batch, self.max_wait_s, self.max_queue = max_batch, max_wait_s, max_queue
        self.depth = 0   # requests admitted and not yet answered
        self.arrivals = 0   # requests admitted so far
        self._pending: deque[Job] = deque()
        self._answered = Answered()
        self._wake = self._task = None
        self._stopping = False

    def start(self) -> None:
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
        for job in self._pending:
            if not job.future.done():
                job.future.set_exception(ApiError(503, "shutting_down", "the server is "
                                                  "shutting down"))

    @contextlib.asynccontextmanager
    async def queued(self, inputs: Sequence[Any], options: dict[str, Any], timeout: float,
                     stream: bool = False) -> AsyncIterator[Job]:
        """A request, admitted and awaited: yields its job once its batch ran (a stream's:
        started); leaving frees its place and abandons it.

        Raises:
            ApiError: 429 when the model holds ``max_queue`` requests (with ``Retry-After``);
                503 when the queue is not running or ``timeout`` seconds pass first.
            AttnkitError: an input the app refuses.
        """
        if self._wake is None or self._stopping:
            raise ApiError(503, "not_ready", "the server is starting or stopping")
        if self.depth >= self.max_queue:
            raise ApiError(429, "overloaded", f"run {self.name!r} holds {self.depth} requests "
                           f"(the limit is {self.max_queue}); retry later", RETRY_AFTER)
        loop = asyncio.get_running_loop()
        job = Job(list(inputs), dict(options), loop.time(), loop.create_future(),
                  asyncio.Queue() if stream else None)
        self._pending.append(job)
        self.arrivals += 1
        self._count(+1)
        self._wake.set()

        def expire() -> None:
            if not job.future.done():
                job.abandoned = True
                job.future.set_exception(ApiError(503, "deadline", f"no answer within the "
                                                  f"server's {timeout:g} s; retry later",
                                                  RETRY_AFTER))
        timer = loop.call_later(timeout, expire)   # a timer, not a task per request
        try:
            await job.future
            timer.cancel()
            yield job
        finally:
            timer.cancel()
            job.abandoned = True   # answered, past its deadline, or its client left
            self._count(-1)

    def _count(self, change: int) -> None:
        self.depth += change
        self.metrics.queue_depth.labels(self.name).set(self.depth)

    async def dispatch(self, batch: list[Job]) -> None:
        """Run one batch while holding the thread's turn; resolve each job's future."""
        raise NotImplementedError

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            if not self._live():
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self._pending[0]
            while (self._inputs(first.key) < self.max_batch and not self._stopping
                   and loop.time() < first.arrived + self.max_wait_s):
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(),
                                           first.arrived + self.max_wait_s - loop.time())
            await self._await_returning(first.key)
            async with self.thread.turn:
                # Taken now that the thread is free: all that gathered meanwhile goes along.
                if self._live() and not self._stopping:
                    await self.dispatch(self._take(self._pending[0].key))

    async def _await_returning(self, key: Hashable) -> None:
        """Give the clients that the last batch just answered a moment to come back.

        Clients that wait for each answer before they ask again would otherwise settle into
        two alternating half-size batches: while one decodes, the other's answers travel and
        its next requests queue behind it. Waiting until as many requests have arrived
        since the last batch was answered as it answered (at most `Answered.window` seconds)
        lets them decode together. The wait holds no turn of the thread: another run's batch
        may use it meanwhile. A lone client never waits: its next request is itself the one
        return expected.
        """
        loop = asyncio.get_running_loop()
        deadline = self._answered.at + self._answered.window
        while (self.arrivals - self._answered.arrivals < self._answered.requests
               and self._inputs(key) < self.max_batch and not self._stopping
               and loop.time() < deadline):
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), deadline - loop.time())

    def _live(self) -> bool:
        """Drop the abandoned jobs at the head; whether one is left."""
        while self._pending and self._pending[0].abandoned:
            self._pending.popleft()
        return bool(self._pending)

    def _inputs(self, key: Hashable) -> int:
        return sum(len(j.inputs) for j in self._pending if j.key == key and not j.abandoned)

    def _take(self, key: Hashable) -> list[Job]:
        """The oldest jobs of ``key`` that fit one batch (the first always does)."""
        batch, kept, size, full = [], deque(), 0, False
        for job in (j for j in self._pending if not j.abandoned):
            # First come, first served: once one does not fit, the later ones wait too.
            full = full or (job.key == key and bool(batch)
                            and size + len(job.inputs) > self.max_batch)
            if job.key == key and not full:
                batch.append(job)
                size += len(job.inputs)
            else:
                kept.append(job)
        self._pending = kept
        return batch


class Batcher(Gatherer):
    """A run's plain routes: one ``predict(inputs, options)`` call for a batch's inputs, each
    request getting its own slice back."""

    def __init__(self, name: str, predict: Callable[[list, dict], list], thread: ModelThread,
                 **kwargs: Any):
        super().__init__(name, thread, **kwargs)
        self.predict = predict

    async def submit(self, inputs: Sequence[Any], options: dict[str, Any],
                     timeout: float) -> list[Any]:
        """The results of ``inputs``, computed in a batch with others (errors: `queued`)."""
        async with self.queued(inputs, options, timeout) as job:
            return job.future.result()

    async def dispatch(self, batch: list[Job]) -> None:
        start = time.perf_counter()
        try:
            outcomes = await self.thread.run(self._outcomes, batch)
        except Exception as exc:  # a failure of the server itself: every request learns it
            outcomes = [exc] * len(batch)
        seconds = time.perf_counter() - start
        self.metrics.batch_size.labels(self.name).observe(sum(len(j.inputs) for j in batch))
        self.metrics.batch_seconds.labels(self.name).observe(seconds)
        answered = 0   # a job past its deadline already had its 503: it may not come back
        for job, outcome in zip(batch, outcomes, strict=True):
            if not job.future.done():
                answered += 1
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)
        self._answered = Answered(asyncio.get_running_loop().time(), answered, self.arrivals,
                                  seconds / 4)

    def _outcomes(self, batch: list[Job]) -> list[list[Any] | AttnkitError]:
        """On the model thread: each job's results, or the error of its own inputs."""
        try:
            results = self.predict([x for job in batch for x in job.inputs], batch[0].options)
        except AttnkitError as exc:   # each alone: only the bad one gets the error
            return [exc] if len(batch) == 1 else [self._outcomes([job])[0] for job in batch]
        ends = itertools.accumulate(len(job.inputs) for job in batch)
        return [results[end - len(job.inputs):end] for job, end in zip(batch, ends, strict=True)]


class StreamBatcher(Gatherer):
    """A translate run's streams; ``open_stream(sentences, options)`` reads the sentences at
    once (a bad one raises) and returns an iterator of the app's ``StreamStep`` s."""

    def __init__(self, name: str, open_stream: Callable[[list, dict], Iterator],
                 thread: ModelThread, **kwargs: Any):
        super().__init__(name, thread, **kwargs)
        self.open_stream = open_stream
        self._running: set[asyncio.Task] = set()

    def stream(self, text: str, options: dict[str, Any], timeout: float
               ) -> contextlib.AbstractAsyncContextManager[Job]:
        """One text's stream (`queued`): ``job.events`` gives a ``("start", SentenceStart)``
        per sentence, a ``("token", StreamedToken)`` per token, ``("final", prediction)`` or
        ``("error", exception)``, then ``("end", None)``. A text the app refuses raises
        here, never joining a batch."""
        self.open_stream([text], options)   # reads the text only: the generator waits
        return self.queued([text], options, timeout, stream=True)

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def dispatch(self, batch: list[Job]) -> None:
        # The decoding takes a turn per step: the one held now is released at once.
        task = asyncio.create_task(self._decode(batch), name=f"attnkit-stream-{self.name}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _decode(self, batch: list[Job]) -> None:
        for job in batch:
            if not job.future.done():
                job.future.set_result(None)
        open_jobs, steps = set(range(len(batch))), None
        try:
            steps = self.open_stream([job.inputs[0] for job in batch], batch[0].options)
            self.metrics.batch_size.labels(self.name).observe(len(batch))
            while open_jobs and not all(batch[i].abandoned for i in open_jobs):
                async with self.thread.turn:
                    step = await self.thread.run(next, steps, None)
                if step is None:
                    break
                for i, source_tokens in step.sources.items():
                    batch[i].events.put_nowait(("start", source_tokens))
                for token in step.tokens:
                    batch[token.sentence].events.put_nowait(("token", token))
                self.metrics.tokens.labels(self.name).inc(len(step.tokens))
                for i, prediction in step.finished.items():
                    batch[i].events.put_nowait(("final", prediction))
                    open_jobs.discard(i)
                    batch[i].events.put_nowait(("end", None))
        except Exception as exc:  # a failure of the server itself: each open stream says so
            for i in open_jobs:
                batch[i].events.put_nowait(("error", exc))
        finally:
            for i in open_jobs:   # failed or abandoned: ended all the same
                batch[i].events.put_nowait(("end", None))
            if steps is not None:
                await self.thread.run(steps.close)
