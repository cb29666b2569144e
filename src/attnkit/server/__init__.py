"""``attnkit serve``: trained runs behind an HTTP API and a live page, on FastAPI, uvicorn and
pydantic's own parts. A layer above `attnkit.apps` (any registered app is served through
``load``, ``predict`` and ``page``) and below `attnkit.cli`; importing it imports no web stack,
so ``attnkit --help`` works without the ``serve`` extra.

Example:
    ```python
    from attnkit.server import ServeOptions, parse_run, serve

    serve(ServeOptions(runs=[parse_run("fr=runs/fr")], port=8000))   # until SIGTERM
    ```
"""

from __future__ import annotations

from typing import Any

from attnkit.server.options import RunSpec, ServeOptions, parse_run

__all__ = ["RunSpec", "ServeOptions", "create_app", "parse_run", "serve"]


def __getattr__(name: str) -> Any:
    # The web stack is imported when asked for, not with the package (module docstring).
    if name in ("create_app", "serve"):
        from attnkit.server import app, main

        return {"create_app": app.create_app, "serve": main.serve}[name]
    raise AttributeError(f"module 'attnkit.server' has no attribute {name!r}")
