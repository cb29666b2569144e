"""`ServerState`, all that one server process holds (runs, options, metrics, the model thread,
each run's queues; nothing of a request once it is answered), and what every route asks of it:
the run a request names, an answer's explorer page, a valid key (`require_key`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from attnkit.apps import Prediction
from attnkit.errors import UsageError
from attnkit.server.batching import Batcher, ModelThread, StreamBatcher
from attnkit.server.errors import ApiError
from attnkit.server.loaded_runs import ServedRun
from attnkit.server.options import IMAGE_CHARS, ServeOptions
from attnkit.server.prometheus import Metrics

BEARER = HTTPBearer(auto_error=False, description="a key of the server's --api-keys file")


@dataclass
class ServerState:
    """One server process (module docstring): ``ready`` once its queues run, ``draining``
    once a stop has begun."""

    options: ServeOptions
    runs: dict[str, ServedRun]
    metrics: Metrics = field(default_factory=Metrics)
    thread: ModelThread | None = None
    batchers: dict[str, Batcher] = field(default_factory=dict)
    streams: dict[str, StreamBatcher] = field(default_factory=dict)
    ready: bool = False
    draining: bool = False

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Any) -> AsyncIterator[None]:
        """The app's lifespan: the model thread and every run's queues start; at the stop,
        the queues stop once the requests in flight are answered, then the thread."""
        o, self.thread = self.options, ModelThread()
        queue = {"max_batch": o.max_batch, "max_work": o.max_batch_chars,
                 "max_wait_s": o.max_wait_ms / 1000, "max_queue": o.max_queue,
                 "metrics": self.metrics}
        for name, run in self.runs.items():
            self.batchers[name] = Batcher(name, run.predict, self.thread, **queue)
            if run.streams:
                self.streams[name] = StreamBatcher(name, run.open_stream, self.thread, **queue)
        gatherers = (*self.batchers.values(), *self.streams.values())
        for gatherer in gatherers:
            gatherer.start()
        if o.compile == "auto":
            for run in self.runs.values():
                run.compile("auto")
        self.ready = True
        try:
            yield
        finally:
            self.ready, self.draining = False, True
            for gatherer in gatherers:
                await gatherer.stop()
            await asyncio.to_thread(self.thread.close)

    def run_for(self, app: str | None, name: str | None, *, inputs: str | None = None
                ) -> ServedRun:
        """The run a request names (None: the one run of ``app``), checked to be of ``app``
        (or, with ``inputs``, of an app that reads such inputs).

        Raises:
            ApiError: 404 unknown run or no run of the app; 422 several runs and none named,
                or a run of another app.
        """
        if name is None:
            found = [r for r in self.runs.values() if r.app.name == app]
            if len(found) != 1:
                raise ApiError(422, "run_required", f"several {app} runs are loaded: name one "
                               f"with \"run\" ({', '.join(r.name for r in found)})") if found \
                    else ApiError(404, "unknown_run", f"no {app} run is loaded")
            return found[0]
        run = self.runs.get(name)
        if run is None:
            raise ApiError(404, "unknown_run", f"no run named {name!r} is loaded (loaded: "
                           f"{', '.join(sorted(self.runs))})")
        if (app is not None and run.app.name != app) or (
                inputs is not None and (run.app.inputs == "image") != (inputs == "image")):
            raise ApiError(422, "wrong_app", f"run {name!r} is a {run.app.name} run, which "
                           f"reads {run.app.inputs}s")
        return run

    async def submit(self, run: ServedRun, inputs: Sequence[Any], options: dict[str, Any]
                     ) -> list[Any]:
        """``run``'s results of ``inputs``, batched with others (errors: `Gatherer.queued`);
        each input's work is its characters (an image: `IMAGE_CHARS`) times its beam size."""
        beam = options.get("beam") or options.get("beam_size") or 1
        text = run.app.inputs != "image"
        work = [(len(x) if text and isinstance(x, str) else IMAGE_CHARS) * beam for x in inputs]
        return await self.batchers[run.name].submit(inputs, options, self.options.timeout_s,
                                                    work)

    async def page(self, run: ServedRun, predictions: Sequence[Prediction], asked: bool
                   ) -> str | None:
        """The app's explorer page of ``predictions`` if ``asked`` (None when it has nothing
        to show), built on a worker thread: the model thread goes on with the next batch."""
        def build() -> str | None:
            try:
                return run.app.page(predictions, run.summary())
            except UsageError:   # e.g. reviews without a word the model reads
                return None
        return await run_in_threadpool(build) if asked else None


def state_of(request: Request) -> ServerState:
    """The server's state (a plain call: a FastAPI dependency walks its tree per request)."""
    return request.app.state.server


async def require_key(request: Request, given: Annotated[HTTPAuthorizationCredentials | None,
                                                         Depends(BEARER)]) -> None:
    """A dependency: passes when no key is asked or ``Authorization: Bearer KEY`` holds one.

    Raises:
        ApiError: 401 with ``WWW-Authenticate: Bearer``.
    """
    key = given.credentials.encode() if given is not None else b""
    keys = state_of(request).options.api_keys
    # Every key is compared (no early exit), each in constant time.
    if keys and not sum(hmac.compare_digest(key, k.encode()) for k in keys):
        raise ApiError(401, "unauthorized", "unknown API key" if given else "this server asks "
                       "for an API key: send 'Authorization: Bearer KEY'",
                       {"WWW-Authenticate": "Bearer"})
