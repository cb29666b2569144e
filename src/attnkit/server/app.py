"""`create_app`: the FastAPI application of ``attnkit serve``, from its options and runs.

The metrics (outermost: every request counted and timed), the body limit, the error handlers,
the routes and the live page, FastAPI's own API docs at ``/docs`` (Swagger UI, its files from
the ``fastapi-offline`` package: no CDN, they work offline), and a lifespan that starts the
model thread and the queues and stops them once the last request in flight is answered.

Example:
    ```python
    with TestClient(create_app(ServeOptions(runs=[parse_run("runs/fr")]))) as client:
        client.post("/v1/translate", json={"texts": ["I am cold."]}).json()
    ```
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from attnkit.server import errors, live_page, routes
from attnkit.server.limits import BodyLimit
from attnkit.server.loaded_runs import ServedRun, load_runs
from attnkit.server.options import ServeOptions
from attnkit.server.prometheus import MetricsMiddleware
from attnkit.server.state import ServerState

DESCRIPTION = """Trained attnkit runs behind an HTTP API: each answer comes with the attention
that produced it. Errors are `{"error": {"code": ..., "message": ...}}`. The live page is at
`/`."""


def create_app(options: ServeOptions, runs: dict[str, ServedRun] | None = None) -> FastAPI:
    """The server's application; its state is ``app.state.server`` (`ServerState`).

    Args:
        options: its settings (checked here).
        runs: the runs, already loaded (None: loaded here from ``options.runs``).

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
    try:
        release = version("attnkit")
    except PackageNotFoundError:
        release = "unknown"
    app = FastAPIOffline(title="attnkit", version=release, description=DESCRIPTION,
                         lifespan=lifespan, redoc_url=None, static_url="/docs/static",
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.server = state
    errors.install(app)
    for router in (routes.service, routes.predict, live_page.router):
        app.include_router(router)
    app.add_middleware(BodyLimit, options=options)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics,   # added last: outermost
                       access_log=options.access_log)
    return app
