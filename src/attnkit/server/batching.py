"""Continuous batching on the model thread (`ModelThread`, one per process): when it is free, a
`Gatherer` takes the first request in line and every later one with the same options that fits
in one call (``max_batch`` inputs, ``max_work`` work); a request too large is cut and its rest
goes back in line; one whose client left or whose deadline passed is dropped. `Batcher` answers
a batch with one ``predict`` call; `StreamBatcher` decodes streams one step per turn
(docs/guide/serve.md, "Batching and threads").
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import math
import operator
import time
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from attnkit.errors import AttnkitError
from attnkit.server.errors import ApiError
from attnkit.server.prometheus import Metrics

RETRY_AFTER = {"Retry-After": "1"}   # seconds, when a queue is full or a deadline passed


class ModelThread(ThreadPoolExecutor):
    """The process's model thread; ``turn`` is held while a model call runs, so that the next
    batch is taken once the thread is free."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="attnkit-model")
        self.turn = asyncio.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self, fn, *args)


@dataclass(eq=False)
class Job:
    """One request: its inputs and their work, its options (its batch shares them), its answer's
    future, a stream's events, whether it was abandoned, its place in line (``seq``, ``turns``),
    its inputs sent so far and the results back.
    """

    inputs: list[Any]
    work: list[float]
    options: dict[str, Any]
    key: Hashable   # the options, hashable: a batch is of one key
    arrived: float
    future: asyncio.Future
    events: asyncio.Queue | None = None
    abandoned: bool = False
    seq: int = 0
    turns: int = 0
    taken: int = 0
    results: list[Any] = field(default_factory=list)

    @property
    def left(self) -> int:
        return len(self.inputs) - self.taken


PLACE = operator.attrgetter("turns", "seq")   # a job's place in line: fewer turns, then arrival


class Share(NamedTuple):
    """The inputs ``start:end`` of ``job`` in one model call."""

    job: Job
    start: int
    end: int


class Gatherer:
    """One model's queue and gathering loop; a subclass runs a batch (`dispatch`): a list
    of `Share` s, one per request in it, given to ``model`` (on ``thread``)."""

    def __init__(self, name: str, model: Callable[..., Any], thread: ModelThread, *,
                 max_batch: int, max_wait_s: float, max_queue: int, metrics: Metrics,
                 max_work: float = math.inf):
        self.name, self.model, self.thread, self.metrics = name, model, thread, metrics
        self.max_batch, self.max_wait_s, self.max_queue = max_batch, max_wait_s, max_queue
        self.max_work = max_work
        self.series = {k: getattr(metrics, k).labels(name)   # once: labels() costs a lock
                       for k in ("queue_depth", "batch_size", "batch_seconds")}
        self.depth = 0   # requests admitted and not yet answered
        self.arrivals = 0   # requests admitted so far
        self._pending: list[Job] = []   # the line, by (turns, seq)
        # Until when (loop time) the next batch waits for the clients the last one answered
        # to come back (a quarter of its time), and the arrival count that says they have.
        self._returning = (0.0, 0)
        self._wake = self._task = None
        self._stopping = False

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name=f"attnkit-gather-{self.name}")

    async def stop(self) -> None:
        """Stop once the batch running now is answered; requests still waiting get 503."""
        self._stopping = True
        self._wake.set()
        await self._task
        for job in self._pending:
            if not job.future.done():
                job.future.set_exception(ApiError(503, "shutting_down", "the server is "
                                                  "shutting down"))

    def _admit(self, inputs: Sequence[Any], options: dict[str, Any], timeout: float,
               stream: bool, work: Sequence[float] | None) -> tuple[Job, asyncio.TimerHandle]:
        """A job in line (``work``: each input's; None: 1 each) and the timer of its deadline.

        Raises:
            ApiError: 429 when the model holds ``max_queue`` requests (with ``Retry-After``);
                503 when the queue is not running or ``timeout`` seconds pass first.
        """
        if self._wake is None or self._stopping:
            raise ApiError(503, "not_ready", "the server is starting or stopping")
        if self.depth >= self.max_queue:
            raise ApiError(429, "overloaded", f"run {self.name!r} holds {self.depth} requests "
                           f"(the limit is {self.max_queue}); retry later", RETRY_AFTER)
        loop = asyncio.get_running_loop()
        job = Job(list(inputs), list(work) if work is not None else [1] * len(inputs),
                  dict(options), tuple(sorted(options.items())), loop.time(), loop.create_future(),
                  asyncio.Queue() if stream else None, seq=self.arrivals)
        bisect.insort(self._pending, job, key=PLACE)
        self.arrivals += 1
        self.depth += 1
        self.series["queue_depth"].inc()   # a run's plain and stream queues add up
        self._wake.set()

        def expire() -> None:
            if not job.future.done():
                job.abandoned = True
                job.future.set_exception(ApiError(503, "deadline", f"no answer within the "
                                                  f"server's {timeout:g} s; retry later",
                                                  RETRY_AFTER))
        return job, loop.call_later(timeout, expire)   # a timer, not a task per request

    def _leave(self, job: Job, timer: asyncio.TimerHandle) -> None:
        timer.cancel()
        job.abandoned = True   # answered, past its deadline, or its client left
        self.depth -= 1
        self.series["queue_depth"].dec()

    async def _loop(self) -> None:
        while not self._stopping:
            if not self._live():
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self._pending[0]
            await self._wait(first.key, first.arrived + self.max_wait_s)
            # Clients that wait for each answer would otherwise settle into two alternating
            # half-size batches. A lone client never waits.
            await self._wait(first.key, *self._returning)
            async with self.thread.turn:
                # Taken now that the thread is free: all that gathered meanwhile goes along.
                if self._live() and not self._stopping:
                    await self.dispatch(self._take(self._pending[0].key))

    async def _wait(self, key: Hashable, until: float, arrivals: float = math.inf) -> None:
        """Wait, holding no turn of the thread, until ``until`` (loop time), a full batch of
        ``key``, ``arrivals`` requests in all, or a stop."""
        loop = asyncio.get_running_loop()
        while (self.arrivals < arrivals and self._inputs(key) < self.max_batch
               and not self._stopping and loop.time() < until):
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), until - loop.time())

    def _live(self) -> bool:
        """Drop the abandoned jobs at the head; whether one is left."""
        while self._pending and self._pending[0].abandoned:
            del self._pending[0]
        return bool(self._pending)

    def _inputs(self, key: Hashable) -> int:
        return sum(j.left for j in self._pending if j.key == key and not j.abandoned)

    def _take(self, key: Hashable) -> list[Share]:
        """The next call's shares of the jobs of ``key`` (module docstring): what fits of the
        first in line, then each later one that fits whole, in order; once one does not fit,
        the later ones wait too. A job with inputs left goes back in line behind every job
        that has had fewer turns, a new one included."""
        batch: list[Share] = []
        kept: list[Job] = []
        size, work, full = 0, 0.0, False
        for job in self._pending:
            if job.abandoned:
                continue
            n = 0
            if job.key == key and not full:
                n = self._fits(job, size, work)
                if batch and n < job.left:   # a later job goes whole or waits
                    full, n = True, 0
            if not n:
                kept.append(job)
                continue
            batch.append(Share(job, job.taken, job.taken + n))
            size += n
            work += sum(job.work[job.taken:job.taken + n])
            job.taken += n
            job.turns += 1
            if job.left:
                kept.append(job)
        self._pending = sorted(kept, key=PLACE)   # in line again, by its turns
        return batch

    def _fits(self, job: Job, size: int, work: float) -> int:
        """How many of ``job``'s next inputs fit a call that holds ``size`` inputs and
        ``work``; the first input of a call always does."""
        n = 0
        for w in job.work[job.taken:]:
            if size + n >= self.max_batch or (size + n and work + w > self.max_work):
                break
            work += w
            n += 1
        return n


class Batcher(Gatherer):
    """A run's plain routes: one ``model(inputs, **options)`` call (the app's ``predict``) for
    a batch's inputs, each request getting its own slice back."""

    async def submit(self, inputs: Sequence[Any], options: dict[str, Any], timeout: float,
                     work: Sequence[float] | None = None) -> list[Any]:
        """The results of ``inputs``, computed in batches with others.

        Raises:
            ApiError: as `Gatherer._admit`.
            AttnkitError: an input the app refuses.
        """
        job, timer = self._admit(inputs, options, timeout, False, work)
        try:
            return await job.future
        finally:
            self._leave(job, timer)

    async def dispatch(self, batch: list[Share]) -> None:
        start = time.perf_counter()
        try:
            outcomes = await self.thread.run(self._outcomes, batch)
        except Exception as exc:  # a failure of the server itself: every request learns it
            outcomes = [exc] * len(batch)
        seconds = time.perf_counter() - start
        self.series["batch_size"].observe(sum(s.end - s.start for s in batch))
        self.series["batch_seconds"].observe(seconds)
        answered = 0   # a job past its deadline already had its 503: it may not come back
        for (job, _, end), outcome in zip(batch, outcomes, strict=True):
            if job.future.done():
                continue
            if isinstance(outcome, BaseException):
                job.abandoned = True   # its other inputs need not run
                job.future.set_exception(outcome)
            else:
                job.results.extend(outcome)
                if end < len(job.inputs):
                    continue
                job.future.set_result(job.results)
            answered += 1
        self._returning = (asyncio.get_running_loop().time() + seconds / 4,
                           self.arrivals + answered)

    def _outcomes(self, batch: list[Share]) -> list[list[Any] | AttnkitError]:
        """On the model thread: each share's results, or the error of its own inputs."""
        try:
            results = self.model([x for job, a, b in batch for x in job.inputs[a:b]],
                                   **batch[0].job.options)
        except AttnkitError as exc:   # each alone: only the bad one gets the error
            return [exc] if len(batch) == 1 else [self._outcomes([s])[0] for s in batch]
        ends = itertools.accumulate(s.end - s.start for s in batch)
        return [results[end - (s.end - s.start):end] for s, end in zip(batch, ends, strict=True)]


class StreamBatcher(Gatherer):
    """A translate run's streams; ``model(sentences, **options)`` (the app's ``stream``) reads
    the sentences at once (a bad one raises) and returns an iterator of its ``StreamStep`` s."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.series["tokens"] = self.metrics.tokens.labels(self.name)
        self._running: set[asyncio.Task] = set()

    @contextlib.asynccontextmanager
    async def stream(self, text: str, options: dict[str, Any], timeout: float
                     ) -> AsyncIterator[Job]:
        """One text's stream, yielded once started; leaving abandons it. ``job.events`` gives
        a ``("start", SentenceStart)`` per sentence, a ``("token", StreamedToken)`` per token,
        ``("final", prediction)`` or ``("error", exception)``, then ``("end", None)``. A text
        the app refuses raises here, never joining a batch (other errors: `Gatherer._admit`).
        """
        self.model([text], **options)   # reads the text only: the generator waits
        job, timer = self._admit([text], options, timeout, True, None)
        try:
            await job.future
            timer.cancel()
            yield job
        finally:
            self._leave(job, timer)

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def dispatch(self, batch: list[Share]) -> None:
        # The decoding takes a turn per step: the one held now is released at once.
        task = asyncio.create_task(self._decode([share.job for share in batch]),
                                   name=f"attnkit-stream-{self.name}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _decode(self, batch: list[Job]) -> None:
        for job in batch:
            if not job.future.done():
                job.future.set_result(None)
        open_jobs, steps = set(range(len(batch))), None
        try:
            steps = self.model([job.inputs[0] for job in batch], **batch[0].options)
            self.series["batch_size"].observe(len(batch))
            while open_jobs and not all(batch[i].abandoned for i in open_jobs):
                async with self.thread.turn:
                    step = await self.thread.run(next, steps, None)
                if step is None:
                    break
                for i, source_tokens in step.sources.items():
                    batch[i].events.put_nowait(("start", source_tokens))
                for token in step.tokens:
                    batch[token.sentence].events.put_nowait(("token", token))
                self.series["tokens"].inc(len(step.tokens))
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
