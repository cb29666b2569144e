"""Batched streams: the ``/v1/translate/stream`` requests of one model decoded together, one
decoder step at a time.

`StreamBatcher` is the `attnkit.server.gather.Gatherer` of the streaming route. A batch is
one greedy decoding of its requests' sentences (`attnkit.apps.translate.TranslateApp.stream`,
over `attnkit.decoding.greedy_steps`); each decoder step is one job on the model thread, so
the plain batches of every model, and other streams, take turns with it step by step: a long
sentence never holds the model thread for longer than a step. After each step, every token
goes to its request's event queue at once, and a sentence that ended gets its final event.
Several decodings may run at once (a batch that gathered while another decodes starts
without waiting for it); one whose clients have all left is stopped.

Each request's sentence is read when it is submitted, so a bad one is answered 422 on its
own and never joins a batch.

Example:
    ```python
    streams = StreamBatcher("fr", open_stream, compute, max_batch=64, max_wait_s=0.005,
                            max_queue=512, metrics=metrics)
    streams.start()
    job = await streams.submit("I am cold.", {"attention": True}, timeout=30)
    while (event := await job.events.get())[0] != "end": ...
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from attnkit.server.gather import Gatherer, Job

OpenStream = Callable[[list[str], dict[str, Any]], Iterator[Any]]


class StreamBatcher(Gatherer):
    """Dynamic batching of one model's streams (module docstring).

    Args:
        name: the run's name.
        open_stream: ``(sentences, options) -> an iterator of StreamStep`` (reading the
            sentences at once: a bad one raises before any decoding).
        **kwargs: `Gatherer`'s.
    """

    def __init__(self, name: str, open_stream: OpenStream, compute: Any, **kwargs: Any):
        super().__init__(name, compute, **kwargs)
        self.open_stream = open_stream
        self._running: set[asyncio.Task] = set()

    async def submit(self, text: str, options: dict[str, Any], timeout: float) -> Job:
        """Queue one sentence; returns once its decoding has started. Its events then come
        from ``job.events``: ``("start", source tokens)``, ``("token", StreamedToken)`` for
        each token, then ``("final", prediction)`` or ``("error", exception)``, then
        ``("end", None)``. The caller `release` s the job.

        Raises:
            AttnkitError: a sentence the app refuses (nothing is queued).
            ApiError: 429 (queue full), 503 (not started within ``timeout`` seconds).
        """
        self.open_stream([text], options)   # reads the sentence only: the generator waits
        job = self.admit([text], options, stream=True)
        try:
            await self.wait(job, timeout)
        except BaseException:
            self.release(job)
            raise
        return job

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def dispatch(self, batch: list[Job]) -> None:
        task = asyncio.create_task(self._decode(batch), name=f"attnkit-stream-{self.name}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _decode(self, batch: list[Job]) -> None:
        for job in batch:
            if not job.future.done():
                job.future.set_result(None)
        open_jobs = set(range(len(batch)))
        steps = None
        try:
            steps = self.open_stream([job.inputs[0] for job in batch], batch[0].options)
            self.metrics.batch_size.labels(self.name).observe(len(batch))
            while open_jobs and not all(batch[i].abandoned for i in open_jobs):
                step = await self.compute.run(next, steps, None)
                if step is None:
                    break
                for i, source_tokens in step.sources.items():
                    batch[i].events.put_nowait(("start", source_tokens))
                for token in step.tokens:
                    batch[token.sentence].events.put_nowait(("token", token))
                self.metrics.tokens.labels(self.name).inc(len(step.tokens))
                for i, prediction in step.finished.items():
                    batch[i].events.put_nowait(("final", prediction))
                    batch[i].events.put_nowait(("end", None))
                    open_jobs.discard(i)
        except Exception as exc:  # a failure of the server itself: each open stream says so
            for i in open_jobs:
                batch[i].events.put_nowait(("error", exc))
                batch[i].events.put_nowait(("end", None))
            open_jobs.clear()
        finally:
            for i in open_jobs:   # abandoned: nobody reads these; end them all the same
                batch[i].events.put_nowait(("end", None))
            if steps is not None:
                await self.compute.run(steps.close)
