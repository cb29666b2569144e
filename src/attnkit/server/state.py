"""What one server process holds while it runs, and what every route asks of it.

`ServerState` is the server's only state: the loaded runs, the options, the metrics, the model
thread and each model's queues. Nothing a request brings is kept once it is answered: any
replica answers any request (the server is stateless).

Example:
    ```python
    state = request.app.state.server
    run = state.run_for("translate", body.run)
    predictions = await state.batchers[run.name].submit(body.texts, options, 30)
    ```
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from attnkit.apps import Prediction
from attnkit.errors import UsageError
from attnkit.server.batcher import Batcher
from attnkit.server.compute import Compute
from attnkit.server.errors import ApiError
from attnkit.server.metrics import Metrics
from attnkit.server.options import ServeOptions
from attnkit.server.runs import ServedRun
from attnkit.server.streams import StreamBatcher


@dataclass
class ServerState:
    """One server process (module docstring).

    Attributes:
        options: its settings.
        runs: the loaded runs, by name.
        metrics: its Prometheus metrics.
        compute: the model thread (None until the server starts).
        batchers, streams: each run's queues (filled when the server starts).
        ready: every model loaded and its queues started.
        draining: a stop was asked: requests in flight finish, ``/readyz`` answers 503.
    """

    options: ServeOptions
    runs: dict[str, ServedRun]
    metrics: Metrics = field(default_factory=Metrics)
    compute: Compute | None = None
    batchers: dict[str, Batcher] = field(default_factory=dict)
    streams: dict[str, StreamBatcher] = field(default_factory=dict)
    ready: bool = False
    draining: bool = False

    def start(self) -> None:
        """Start the model thread and every run's queues (on the running event loop)."""
        o = self.options
        self.compute = Compute()
        queue = {"max_batch": o.max_batch, "max_wait_s": o.max_wait_ms / 1000,
                 "max_queue": o.max_queue, "metrics": self.metrics}
        for name, run in self.runs.items():
            self.batchers[name] = Batcher(name, _predict(run), self.compute, **queue)
            if run.streams:
                self.streams[name] = StreamBatcher(name, _stream(run), self.compute, **queue)
        for gatherer in (*self.batchers.values(), *self.streams.values()):
            gatherer.start()
        self.ready = True

    async def stop(self) -> None:
        """Stop the queues (after the requests in flight are answered), then the thread."""
        self.ready = False
        for gatherer in (*self.batchers.values(), *self.streams.values()):
            await gatherer.stop()
        if self.compute is not None:
            await asyncio.to_thread(self.compute.close)

    def run_for(self, app: str | None, name: str | None, *, inputs: str | None = None
                ) -> ServedRun:
        """The run a request names (None: the one run of ``app``), checked to be of ``app``
        (or, with ``inputs``, of an app that reads such inputs).

        Raises:
            ApiError: 404 unknown run or no run of the app; 422 several runs and none named,
                or a run of another app.
        """
        if name is not None:
            run = self.runs.get(name)
            if run is None:
                raise ApiError(404, "unknown_run", f"no run named {name!r} is loaded (loaded: "
                               f"{', '.join(sorted(self.runs))})")
            if app is not None and run.app.name != app:
                raise ApiError(422, "wrong_app", f"run {name!r} is a {run.app.name} run, not a "
                               f"{app} run")
            if inputs is not None and (run.app.inputs == "image") != (inputs == "image"):
                raise ApiError(422, "wrong_app", f"run {name!r} ({run.app.name}) reads "
                               f"{run.app.inputs}s")
            return run
        found = [r for r in self.runs.values() if r.app.name == app]
        if not found:
            raise ApiError(404, "unknown_run", f"no {app} run is loaded")
        if len(found) > 1:
            raise ApiError(422, "run_required", f"several {app} runs are loaded: name one with "
                           f"\"run\" ({', '.join(r.name for r in found)})")
        return found[0]

    async def page(self, run: ServedRun, predictions: Sequence[Prediction]) -> str | None:
        """The app's explorer page of ``predictions`` (None when it has nothing to show, e.g.
        reviews without a word the model reads), built on the model thread."""
        def build() -> str | None:
            try:
                return run.app.page(predictions, run.summary())
            except UsageError:
                return None
        return await self.compute.run(build)


def state_of(request: Request) -> ServerState:
    """The state of the server answering ``request``."""
    return request.app.state.server


def _predict(run: ServedRun):
    def predict(inputs: list[Any], options: dict[str, Any]) -> list[Any]:
        return run.app.predict(run.loaded, inputs, **options)
    return predict


def _stream(run: ServedRun):
    def open_stream(texts: list[str], options: dict[str, Any]):
        return run.app.stream(run.loaded, texts, **options)
    return open_stream
