"""The server's Prometheus metrics (``GET /metrics``, through ``prometheus-client``).

Requests, their time, batch sizes and times, queue depth and streamed tokens (the names:
docs/guide/serve.md, "Metrics"). Each `Metrics` has its own registry; with ``--workers`` the
processes share ``PROMETHEUS_MULTIPROC_DIR``. Routes and methods are labelled from fixed sets
(else ``other``), so a scan of random URLs cannot grow the label set.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from attnkit.server.limits import printable

LATENCY_BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE",
                     "PATCH"))   # RFC 9110's and PATCH; a client may send any token
access = logging.getLogger("attnkit.access")


class Metrics:
    """The server's metrics (module docstring)."""

    def __init__(self) -> None:
        shared = bool(os.environ.get(MULTIPROC_ENV))
        # Shared, values live in files and the registry only names them.
        self.registry = None if shared else CollectorRegistry()
        kw: dict[str, Any] = {"registry": self.registry}
        self.requests = Counter("attnkit_requests", "Requests answered",
                                ("route", "method", "status"), **kw)
        self.latency = Histogram("attnkit_request_seconds", "Time to answer a request",
                                 ("route",), buckets=LATENCY_BUCKETS, **kw)
        self.batch_size = Histogram("attnkit_batch_size", "Inputs per model call", ("run",),
                                    buckets=BATCH_BUCKETS, **kw)
        self.batch_seconds = Histogram("attnkit_batch_seconds", "Time of one model call",
                                       ("run",), buckets=LATENCY_BUCKETS, **kw)
        self.queue_depth = Gauge("attnkit_queue_depth", "Requests waiting or running", ("run",),
                                 **kw, **({"multiprocess_mode": "livesum"} if shared else {}))
        self.tokens = Counter("attnkit_streamed_tokens", "Tokens sent by streams", ("run",), **kw)

    def render(self) -> bytes:
        """The text exposition."""
        registry = self.registry
        if registry is None:
            from prometheus_client import multiprocess
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)


class MetricsMiddleware:
    """Counts and times every request (pure ASGI: a stream is timed to its last byte) and,
    with ``access_log``, logs one line of each: method, path (escaped and cut: `printable`),
    status, milliseconds."""

    def __init__(self, app: Any, metrics: Metrics, access_log: bool = False):
        self.app, self.access_log = app, access_log
        # Once per series (bounded, as the labels): prometheus-client's labels() takes a lock.
        self._series = functools.cache(lambda route, method, status: (
            metrics.requests.labels(route, method, str(status)), metrics.latency.labels(route)))

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500

        async def counted(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, counted)
        finally:
            seconds = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None) or "other"
            method = scope["method"] if scope["method"] in METHODS else "other"
            series = self._series(route, method, status)
            series[0].inc()
            series[1].observe(seconds)
            if self.access_log:   # uvicorn's own access line has no time
                access.info("%s %s %s %.1f ms", printable(scope["method"], 20),
                            printable(scope["path"], 500), status, seconds * 1000)
