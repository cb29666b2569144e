"""``GET /metrics``: the server in the Prometheus text format (the ``prometheus-client``
library).

* ``attnkit_requests_total{route, method, status}``: requests answered;
* ``attnkit_request_seconds{route}``: latency, from the first byte in to the last byte out
  (a stream's whole length);
* ``attnkit_batch_size{run}``: inputs per model call; ``attnkit_batch_seconds{run}``: its time;
* ``attnkit_queue_depth{run}``: requests waiting or running for each model;
* ``attnkit_streamed_tokens_total{run}``: tokens sent by ``/v1/translate/stream``.

Each server (`Metrics`) has its own registry, so two apps in one process (tests) never share
counts. With ``--workers N`` the processes write their values to a shared folder
(``PROMETHEUS_MULTIPROC_DIR``, set by `attnkit.server.main`) and any of them answers for
all, the way prometheus-client's multiprocess mode works. Routes are labelled by their
template (unknown paths: ``other``), so a scan of random URLs cannot grow the label set.

Example:
    ```python
    metrics = Metrics()
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    body, content_type = metrics.render()
    ```
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

LATENCY_BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess() -> bool:
    """Whether this process shares its metrics with the other workers (module docstring)."""
    return bool(os.environ.get(MULTIPROC_ENV))


class Metrics:
    """The server's metrics (module docstring)."""

    def __init__(self) -> None:
        # In multiprocess mode values live in files; the registry only names them.
        self.registry = None if multiprocess() else CollectorRegistry()
        kw: dict[str, Any] = {"registry": self.registry}
        self.requests = Counter("attnkit_requests", "Requests answered",
                                ("route", "method", "status"), **kw)
        self.latency = Histogram("attnkit_request_seconds", "Time to answer a request",
                                 ("route",), buckets=LATENCY_BUCKETS, **kw)
        self.batch_size = Histogram("attnkit_batch_size", "Inputs per model call", ("run",),
                                    buckets=BATCH_BUCKETS, **kw)
        self.batch_seconds = Histogram("attnkit_batch_seconds", "Time of one model call",
                                       ("run",), buckets=LATENCY_BUCKETS, **kw)
        gauge_kw = {**kw, "multiprocess_mode": "livesum"} if multiprocess() else kw
        self.queue_depth = Gauge("attnkit_queue_depth", "Requests waiting or running",
                                 ("run",), **gauge_kw)
        self.tokens = Counter("attnkit_streamed_tokens", "Tokens sent by streams", ("run",),
                              **kw)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        registry = self.registry
        if registry is None:
            from prometheus_client import multiprocess as mp

            registry = CollectorRegistry()
            mp.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """Counts and times every request (pure ASGI: a stream is timed to its last byte).

    Args:
        app: the ASGI app inside.
        metrics: where to count.
    """

    def __init__(self, app: Any, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [500]

        async def counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "other"
            self.metrics.requests.labels(label, scope["method"], str(status[0])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - start)
