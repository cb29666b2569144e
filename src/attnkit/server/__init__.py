"""``attnkit serve``: trained runs behind an HTTP API and a live page, batched, bounded and
drained.

The server is a layer above `attnkit.apps` (it serves any registered app through ``load``,
``predict`` and ``page``) and below `attnkit.cli` (which only parses ``attnkit serve``'s
arguments). It needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client,
python-multipart); importing this package does not import them, so ``attnkit --help`` works
without them.

* `attnkit.server.options`: `ServeOptions`, every setting and its checks;
* `attnkit.server.app`: `create_app`, the FastAPI application;
* `attnkit.server.main`: `serve`, one process, or ``--workers N`` of them, that stops
  cleanly on SIGTERM/SIGINT;
* the parts: runs, batching (gather, batcher, streams), the model thread (compute), limits,
  images, keys (auth), errors, metrics, the routes (service, api, sse) and pages (page, docs).

Example:
    ```python
    from attnkit.server import ServeOptions, parse_run, serve

    serve(ServeOptions(runs=[parse_run("fr=runs/fr")], port=8000))
    ```
"""

from __future__ import annotations

from typing import Any

from attnkit.server.options import RunSpec, ServeOptions, parse_run

__all__ = ["RunSpec", "ServeOptions", "create_app", "parse_run", "serve"]


def __getattr__(name: str) -> Any:
    # The web stack is imported when asked for, not with the package (module docstring).
    if name == "create_app":
        from attnkit.server.app import create_app

        return create_app
    if name == "serve":
        from attnkit.server.main import serve

        return serve
    raise AttributeError(f"module 'attnkit.server' has no attribute {name!r}")
