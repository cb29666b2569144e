"""`serve`: run the server until SIGTERM or SIGINT, then drain and exit 0.

Start-up, in order: the options are checked, the runs loaded (the first that fails stops here
with its one error line, nothing listening yet), the address bound (a busy port is one error
line too), then uvicorn serves the application (`attnkit.server.app.create_app`) through the
guarded protocol of `attnkit.server.connections`.

``--workers N`` is uvicorn's own supervisor (``Multiprocess``): N spawned processes share the
one socket, each loading every run and fixing its torch threads (``--threads``, by default the
cores divided by N); the command says it serves once all N have loaded. A worker that cannot
load stops the start with its error line (each run folder is checked first, in this process),
one that dies later is replaced, and ``/metrics`` of any worker counts all of them
(prometheus-client's multiprocess mode, in a temporary folder removed at the end). A worker
whose supervisor is gone stops by itself.

Stopping is uvicorn's: the first SIGTERM or SIGINT stops accepting connections, closes the idle
ones and lets every request in flight finish, streams included, for at most
``--drain-seconds``; then the queues and the model thread stop, and the command exits 0. A
second SIGINT stops at once.

Example:
    ```python
    serve(ServeOptions(runs=[parse_run("runs/fr")], port=8000))   # returns after SIGTERM
    ```
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from attnkit.errors import AttnkitError, UsageError
from attnkit.server.options import ServeOptions

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Where a worker says it has loaded (ready-PID) or why it could not (error).
ERROR_FILE, READY_PREFIX = "error", "ready-"


def serve(options: ServeOptions) -> int:
    """Serve until SIGTERM or SIGINT (module docstring); returns the exit status (0).

    Raises:
        UsageError: bad options, the serve extra missing, an address that cannot be used.
        CheckpointError: a run that cannot be loaded.
    """
    require_web_stack()
    options.check()
    if options.workers > 1:
        return _serve_workers(options)
    import uvicorn

    from attnkit.server.app import create_app
    from attnkit.server.loaded_runs import load_runs

    set_threads(options.torch_threads())
    app = create_app(options, load_runs(options))
    sock = listen(options)
    _say_serving(sock, options, ", ".join(app.state.server.runs) + " ")
    server = uvicorn.Server(uvicorn_config(app, options))
    # uvicorn re-raises the stop signal to the handlers it found once it has drained, so that
    # the process dies of it (status 143 or 130); these take it as done: a drained server has
    # done its job. Before uvicorn's own are in place, they stop it the same way.
    before = {sig: signal.signal(sig, lambda *_: setattr(server, "should_exit", True))
              for sig in STOP_SIGNALS}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return 0


def require_web_stack() -> None:
    """Raises:
        UsageError: a package of the ``serve`` extra is missing.
    """
    from importlib.util import find_spec

    missing = [package for module, package in (
        ("fastapi", "fastapi"), ("fastapi_offline", "fastapi-offline"), ("uvicorn", "uvicorn"),
        ("prometheus_client", "prometheus-client"), ("python_multipart", "python-multipart"))
        if find_spec(module) is None]
    if missing:
        raise UsageError(f"attnkit serve needs {', '.join(missing)}: pip install "
                         "'attnkit[serve]'")


def set_threads(threads: int) -> None:
    """torch's intra-op threads for this process (``--threads``), and one inter-op thread (the
    model thread runs one call at a time: nothing to run beside it)."""
    import torch

    torch.set_num_threads(threads)
    # torch allows it once, before any parallel work: a process that did some keeps its own.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def listen(options: ServeOptions) -> socket.socket:
    """The bound, listening socket of ``options.host``:``options.port`` (port 0: any free one),
    for uvicorn and its workers.

    Raises:
        UsageError: the address cannot be used (in use, not this machine's, not allowed).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            options.host, options.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[0]
        # The protocol named (IPPROTO_TCP, not 0): asyncio sets TCP_NODELAY only on sockets
        # that say they are TCP, and without it a keep-alive client waits ~40 ms per answer.
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        raise UsageError(f"cannot listen on {options.host}:{options.port} "
                         f"({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


def uvicorn_config(app: Any, options: ServeOptions, **more: Any) -> Any:
    """uvicorn's settings for ``app``: the guarded protocol and its limits, the drain, the
    log (uvicorn's lines and the server's own on stderr, repeats written once per 10 s)."""
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from attnkit.server.connections import GuardedHTTP

    log = copy.deepcopy(LOGGING_CONFIG)
    log["filters"] = {"repeated": {"()": "attnkit.server.connections.Repeated"}}
    log["handlers"]["default"]["filters"] = ["repeated"]
    for name in ("attnkit.server", "asyncio"):
        log["loggers"][name] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return uvicorn.Config(app, lifespan="on", log_config=log, access_log=False,
                          http=GuardedHTTP, limit_concurrency=options.max_connections,
                          timeout_keep_alive=options.header_timeout_s,
                          timeout_graceful_shutdown=max(options.drain_seconds, 0.001),
                          server_header=False, **more)


def worker_app(options: ServeOptions, folder: str, parent: int) -> Any:
    """The application of one ``--workers`` process (uvicorn's factory, called in the worker):
    it loads the runs and says so in ``folder``, or writes why it could not and exits with
    uvicorn's start-up failure status (the supervisor then stops)."""
    from uvicorn.config import STARTUP_FAILURE

    from attnkit.server.app import create_app
    from attnkit.server.loaded_runs import load_runs

    try:
        set_threads(options.torch_threads())
        app = create_app(options, load_runs(options))
    except AttnkitError as exc:
        with open(os.path.join(folder, ERROR_FILE), "a", encoding="utf-8") as f:
            f.write(f"{exc}\n")
        sys.exit(STARTUP_FAILURE)
    Path(folder, f"{READY_PREFIX}{os.getpid()}").touch()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)   # nobody else will stop it: drain and stop
    threading.Thread(target=watch, daemon=True, name="attnkit-parent-watch").start()
    return app


def _serve_workers(options: ServeOptions) -> int:
    import functools

    from uvicorn.supervisors import Multiprocess

    from attnkit.server.loaded_runs import check_run
    from attnkit.server.prometheus import MULTIPROC_ENV

    for spec in options.runs:
        check_run(spec, options)
    sock = listen(options)
    folder = tempfile.mkdtemp(prefix="attnkit-serve-")
    os.environ[MULTIPROC_ENV] = folder   # before the spawn: the workers inherit it
    factory = functools.partial(worker_app, options, folder, os.getpid())
    supervisor = Multiprocess(uvicorn_config(factory, options, factory=True,
                                             workers=options.workers), sockets=[sock])
    waiting = threading.Thread(target=_say_when_ready, args=(sock, options, folder,
                                                             supervisor), daemon=True)
    try:
        waiting.start()
        supervisor.run()
        errors = Path(folder, ERROR_FILE)
        if errors.exists():
            raise UsageError(errors.read_text(encoding="utf-8").splitlines()[0])
        return 0
    finally:
        sock.close()
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _say_when_ready(sock: socket.socket, options: ServeOptions, folder: str,
                    supervisor: Any) -> None:
    while not supervisor.should_exit.wait(0.1):
        if len(list(Path(folder).glob(READY_PREFIX + "*"))) >= options.workers:
            _say_serving(sock, options, "")
            return


def _say_serving(sock: socket.socket, options: ServeOptions, runs: str) -> None:
    host, port = sock.getsockname()[:2]
    threads, n = options.torch_threads(), options.workers
    print(f"attnkit: serving {runs}on http://{f'[{host}]' if ':' in host else host}:{port} "
          f"({n} process{'es' * (n > 1)}, {threads} thread{'s' * (threads != 1)}"
          f"{' each' * (n > 1)}; the live page at /, the API docs at /docs)",
          file=sys.stderr, flush=True)
