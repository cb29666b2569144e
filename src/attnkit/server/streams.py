"""Batched streams: the ``/v1/translate/stream`` requests of one model decoded together, one
decoder step at a time.

`StreamBatcher` is the `attnkit.server.batching.Gatherer` of the streaming route. A batch is
one greedy decoding of its requests' sentences (`attnkit.apps.translate.TranslateApp.stream`);
each decoder step is one turn of the model thread, so plain batches and other streams take
turns with it step by step: a long sentence never holds the thread for longer than a step.
After each step every token goes to its request's events at once, and a sentence that ended
gets its final event. A batch that gathered while others decode starts without waiting for
them; one whose clients have all left is stopped. Each sentence is read when it is submitted,
so a bad one is answered 422 on its own and never joins a batch.

Example:
    ```python
    streams = StreamBatcher("fr", open_stream, thread, max_batch=64, max_wait_s=0,
                            max_queue=512, metrics=metrics)
    job = await streams.submit("I am cold.", {"attention": True}, timeout=30)
    while (event := await job.events.get())[0] != "end": ...
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from attnkit.server.batching import Gatherer, Job, ModelThread


class StreamBatcher(Gatherer):
    """Batched streams of one model (module docstring); ``open_stream(sentences, options)``
    reads the sentences at once (a bad one raises) and returns an iterator of the app's
    ``StreamStep`` s."""

    def __init__(self, name: str, open_stream: Callable[[list[str], dict[str, Any]],
                                                        Iterator[Any]],
                 thread: ModelThread, **kwargs: Any):
        super().__init__(name, thread, **kwargs)
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
        # The decoding takes a turn per step: the turn held now is released at once.
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
