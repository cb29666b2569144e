"""`serve`: run the server until SIGTERM or SIGINT, then drain and exit 0.

Start-up, in order: the options are checked, torch's threads fixed, every run loaded (the first
that fails stops here, one error line, nothing listening yet), the address bound (a busy port is
one error line too), then uvicorn serves the application (`attnkit.server.app.create_app`).
``--workers N`` runs N such processes on the one address (`attnkit.server.workers`). How a
process stops (drains, exits 0) is `attnkit.server.process`'s.

Example:
    ```python
    serve(ServeOptions(runs=[parse_run("runs/fr")], port=8000))   # returns after SIGTERM
    ```
"""

from __future__ import annotations

import sys

from attnkit.server.options import ServeOptions
from attnkit.server.process import address_of, build_server, listen, require_web_stack


def serve(options: ServeOptions) -> int:
    """Serve until SIGTERM or SIGINT (module docstring); returns the exit status (0).

    Raises:
        UsageError: bad options, the serve extra missing, an address that cannot be used.
        CheckpointError: a run that cannot be loaded.
    """
    require_web_stack()
    options.check()
    if options.workers > 1:
        from attnkit.server.workers import serve_workers  # the web stack only when it runs

        return serve_workers(options)
    from attnkit.server.app import create_app
    from attnkit.server.compute import set_threads
    from attnkit.server.runs import load_runs

    set_threads(options.torch_threads())
    runs = load_runs(options)
    app = create_app(options, runs)
    sock = listen(options)
    threads = options.torch_threads()
    print(f"attnkit: serving {', '.join(runs)} on {address_of(sock)} (1 process, {threads} "
          f"thread{'s' * (threads != 1)}; the live page at /, the API docs at /docs)",
          file=sys.stderr, flush=True)
    build_server(app, options).run(sockets=[sock])
    return 0
