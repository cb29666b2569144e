"""Batched predictions: the requests gathered for one model answered by one ``predict`` call.

`Batcher` is the `attnkit.server.gather.Gatherer` of the plain routes (``/v1/translate``,
``/v1/sentiment``, ``/v1/caption``): a batch is the inputs of its requests in order, one call
of the app's ``predictions`` on the model thread, and each request gets its own slice back.
One batch of a model runs at a time; the next gathers meanwhile.

An input the app refuses (an empty sentence, an unreadable image) fails the call for every
request in the batch, so such a batch is run again one request at a time: only the request
that holds the bad input gets the error (422), the others their answers.

Example:
    ```python
    batcher = Batcher("fr", lambda inputs, options: app.predictions(loaded, inputs, **options),
                      compute, max_batch=64, max_wait_s=0.005, max_queue=512, metrics=metrics)
    batcher.start()
    predictions = await batcher.submit(["I am cold."], {"beam": 1}, timeout=30)
    ```
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from attnkit.errors import AttnkitError
from attnkit.server.gather import Gatherer, Job

Predict = Callable[[list[Any], dict[str, Any]], list[Any]]


class Batcher(Gatherer):
    """Dynamic batching of one model's predictions (module docstring).

    Args:
        name: the run's name.
        predict: ``(inputs, options) -> one result per input``, run on the model thread.
        **kwargs: `Gatherer`'s (``compute``, ``max_batch``, ``max_wait_s``, ``max_queue``,
            ``metrics``).
    """

    def __init__(self, name: str, predict: Predict, compute: Any, **kwargs: Any):
        super().__init__(name, compute, **kwargs)
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
            outcomes = await self.compute.run(self._outcomes, batch)
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
        options = batch[0].options
        try:
            results = self.predict([x for job in batch for x in job.inputs], options)
        except AttnkitError as exc:
            if len(batch) == 1:
                return [exc]
            return [self._alone(job) for job in batch]
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
