"""The runs one server process holds and all else it holds: `load_runs` loads every ``--run``
(its app: the ``"app"`` of its ``config.json``, or of an export's ``attnkit.json``) before the
server listens; `ServerState` holds them, the options, the metrics, the model thread and each
run's queues (nothing of a request once it is answered), and gives every route the run a
request names, an answer's explorer page and a valid key (`require_key`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from attnkit.apps import APPS, App, Loaded, Prediction
from attnkit.apps.results import TEST_METRICS
from attnkit.apps.run_files import read_json_object
from attnkit.errors import CheckpointError, UsageError
from attnkit.server.batching import Batcher, ModelThread, StreamBatcher
from attnkit.server.errors import ApiError, log
from attnkit.server.options import IMAGE_CHARS, RunSpec, ServeOptions
from attnkit.server.prometheus import Metrics

# What declares a folder's app: an export's settings first (it also holds CTranslate2's own
# config.json, which names no app), then a training run's config.
APP_FILES = (("attnkit.json", "ctranslate2"), ("config.json", None))


@dataclass
class ServedRun:
    """One loaded run: its name in requests, its `App`, the loaded run and its
    ``test_metrics.json`` (None: none, or unreadable)."""

    name: str
    app: App
    loaded: Loaded
    test_metrics: dict[str, Any] | None

    @property
    def streams(self) -> bool:
        """Whether ``/v1/translate/stream`` can run it (attnkit's engine of a translate run)."""
        return hasattr(self.app, "stream") and getattr(self.loaded.engine, "streams", False)

    def summary(self) -> dict[str, Any]:
        """The run's summary for pages, named by its name: no path of the server's disk."""
        out = self.loaded.summary()
        out["run"] = self.name
        if "data" in out and ("/" in out["data"] or os.sep in out["data"]):
            out["data"] = Path(out["data"]).name
        return out

    def info(self) -> dict[str, Any]:
        """What ``GET /v1/models`` shows of it."""
        engine = self.loaded.engine
        return {"name": self.name, "app": self.app.name, "inputs": self.app.inputs,
                "engine": getattr(engine, "name", None),
                "decoding": getattr(engine, "path", None), "streams": self.streams,
                "summary": self.summary(), "test_metrics": self.test_metrics}

    def compile(self, mode: str) -> None:
        """Compiled decoding for a run whose engine has it (`attnkit.server.options.COMPILE`):
        ``"on"`` now, ``"auto"`` in a thread of its own while the eager engine answers (the
        engine switches when it is ready, with a log line), ``"off"`` never."""
        build = getattr(self.loaded.engine, "compile", None)
        if build is None or mode == "off":
            return
        if mode == "on":
            build(log=log.info)
            return

        def background() -> None:
            if build(log=log.info):
                log.info("%s: decoding switched to the compiled engine", self.name)

        threading.Thread(target=background, name=f"compile {self.name}", daemon=True).start()


def check_run(spec: RunSpec, options: ServeOptions) -> tuple[App, str | None]:
    """The app a ``--run`` folder declares and the engine to run it with (None: the app's
    default), before anything is loaded; CheckpointError for no such folder or one that
    declares no app, UsageError for an app this attnkit does not have."""
    folder = spec.path
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such run folder")
    name, needed = next(((n, e) for n, e in APP_FILES if (folder / n).exists()), (None, None))
    if name is None:
        raise CheckpointError(f"{folder}: not a run folder (no config.json)")
    app = read_json_object(folder / name, "the run's settings", root=folder).get("app")
    if not isinstance(app, str):
        raise CheckpointError(f"{folder / name}: names no app")
    if app not in APPS.names():
        raise UsageError(f"{folder} is a run of the app {app!r}, which this attnkit does "
                         f"not have (apps: {', '.join(APPS.names())})")
    return APPS[app], options.engine or needed


def load_runs(options: ServeOptions) -> dict[str, ServedRun]:
    """Every ``--run``, loaded in order (errors: `check_run`, the app's ``load``)."""
    runs = {}
    for spec in options.runs:
        app, engine = check_run(spec, options)
        loaded = app.load(spec.path, device=options.device, engine=engine)
        runs[spec.name] = ServedRun(spec.name, app, loaded, _test_metrics(spec.path))
        log.info("loaded %s (%s): %s", spec.name, app.name, loaded.description)
        if options.compile == "on":
            runs[spec.name].compile("on")
    return runs


def _test_metrics(folder: Path) -> dict[str, Any] | None:
    if not (folder / TEST_METRICS).exists():
        return None
    try:
        metrics = read_json_object(folder / TEST_METRICS, "the run's test metrics", root=folder)
    except CheckpointError as exc:   # not part of the model: served without its scores
        log.warning("%s", exc)
        return None
    return {k: v for k, v in metrics.items() if k != "run"}   # a path of the trainer's disk


BEARER = HTTPBearer(auto_error=False, description="a key of the server's --api-keys file")


@dataclass
class ServerState:
    """One server process (module docstring): ``ready`` once its queues run, ``draining``
    once a stop has begun."""

    options: ServeOptions
    runs: dict[str, ServedRun]
    metrics: Metrics = field(default_factory=Metrics)
    batchers: dict[str, Batcher] = field(default_factory=dict)
    streams: dict[str, StreamBatcher] = field(default_factory=dict)
    ready: bool = False
    draining: bool = False

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Any) -> AsyncIterator[None]:
        """The app's lifespan: the model thread and every run's queues start; at the stop,
        the queues stop once the requests in flight are answered, then the thread."""
        o, thread = self.options, ModelThread()
        queue = {"max_batch": o.max_batch, "max_work": o.max_batch_chars,
                 "max_wait_s": o.max_wait_ms / 1000, "max_queue": o.max_queue,
                 "metrics": self.metrics}
        for name, run in self.runs.items():
            self.batchers[name] = Batcher(name, partial(run.app.predict, run.loaded), thread,
                                          **queue)
            if run.streams:
                self.streams[name] = StreamBatcher(name, partial(run.app.stream, run.loaded),
                                                   thread, **queue)
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
            await asyncio.to_thread(thread.shutdown)

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
        """``run``'s results of ``inputs``, batched with others (errors: `Gatherer._admit`);
        each input's work is its characters (an image: `IMAGE_CHARS`) times its beam size."""
        beam = options.get("beam") or options.get("beam_size") or 1
        work = [(len(x) if run.app.inputs != "image" else IMAGE_CHARS) * beam for x in inputs]
        return await self.batchers[run.name].submit(inputs, options, self.options.timeout_s, work)

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
