"""``attnkit serve``: trained runs behind an HTTP API and a live page, batched, bounded and
drained, on FastAPI, uvicorn and pydantic's own parts.

The server is a layer above `attnkit.apps` (it serves any registered app through ``load``,
``predict`` and ``page``) and below `attnkit.cli` (which only parses ``attnkit serve``'s
arguments). It needs the ``serve`` extra; importing this package does not import it, so
``attnkit --help`` works without it. `ServeOptions` holds every setting, `create_app` builds
the application, `serve` runs it until SIGTERM or SIGINT; the guide is docs/guide/serve.md.

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
