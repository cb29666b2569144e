"""`create_app`: the FastAPI application of ``attnkit serve``, from its options and runs.

What it assembles, outermost first: the metrics (every request counted and timed), the body
limit (no body over the limit is read), the error handlers (every error one JSON shape), the
routes (`attnkit.server.service`, `attnkit.server.api`, `attnkit.server.sse`, the live page
`attnkit.server.page`, the docs `attnkit.server.docs`), and a lifespan that starts the model
thread and the queues when the server starts and stops them after the last request in flight.

Example:
    ```python
    from fastapi.testclient import TestClient

    app = create_app(ServeOptions(runs=[parse_run("runs/fr")]))
    with TestClient(app) as client:
        client.post("/v1/translate", json={"texts": ["I am cold."]}).json()
    ```
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from attnkit.server import api, docs, errors, page, service, sse
from attnkit.server.limits import BodyLimit, body_limit
from attnkit.server.metrics import MetricsMiddleware
from attnkit.server.options import ServeOptions
from attnkit.server.runs import ServedRun, load_runs
from attnkit.server.state import ServerState

DESCRIPTION = """Trained attnkit runs behind an HTTP API: each answer comes with the attention
that produced it. Errors are `{"error": {"code": ..., "message": ...}}`. The live page is at
`/`, these docs at `/docs`."""


def create_app(options: ServeOptions, runs: dict[str, ServedRun] | None = None) -> FastAPI:
    """The server's application.

    Args:
        options: its settings (checked here).
        runs: the runs, already loaded (None: loaded here from ``options.runs``).

    Returns:
        A FastAPI (ASGI) application; its state is ``app.state.server`` (`ServerState`).

    Raises:
        UsageError: options that cannot work.
        CheckpointError: a run that cannot be loaded.
    """
    options.check()
    state = ServerState(options, load_runs(options) if runs is None else runs)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start()
        try:
            yield
        finally:
            await state.stop()

    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("attnkit")
    except PackageNotFoundError:
        release = "unknown"
    app = FastAPI(title="attnkit", version=release, description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    app.state.server = state
    errors.install(app)
    for module in (service, api, sse, page, docs):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit_of=functools.partial(body_limit, options))
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)   # added last: outermost
    return app
