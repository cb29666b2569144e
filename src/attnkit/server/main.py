"""`serve`: run the server on uvicorn until SIGTERM or SIGINT, then drain and exit 0.

The runs are loaded and the address bound before anything listens, so a run that cannot load
and a busy port are each one error line. ``--workers N`` is uvicorn's own supervisor: N
processes share the socket, each loading every run (docs/guide/serve.md, "More processes,
more machines" and "Stopping").
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import logging
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

# Where a worker says it has loaded (ready-PID) or why it could not (error).
ERROR_FILE, READY = "error", "ready-"


def serve(options: ServeOptions) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit status (0).

    Raises:
        UsageError: bad options, the serve extra missing, an address that cannot be used.
        CheckpointError: a run that cannot be loaded.
    """
    options.check()
    require_web_stack()
    fit_open_files(options.max_connections)
    if options.workers > 1:
        return _serve_workers(options)
    import uvicorn

    app = loaded_app(options)
    sock = listen(options)
    _say_serving(sock, options, ", ".join(app.state.server.runs) + " ")
    server = uvicorn.Server(uvicorn_config(app, options))
    # uvicorn hands the stop signal, once drained, to the handlers it found, so that the
    # process dies of it (143, 130); these take it as done. Before uvicorn's own are in place,
    # they stop it the same way.
    before = {sig: signal.signal(sig, lambda *_: setattr(server, "should_exit", True))
              for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return 0


def require_web_stack() -> None:
    """Raises:
        UsageError: packages of the ``serve`` extra are missing (all of them named: one
            install fixes the lot).
    """
    from importlib.util import find_spec

    missing = [m.replace("_", "-") for m in ("fastapi", "fastapi_offline", "uvicorn",
                                             "prometheus_client", "python_multipart")
               if find_spec(m) is None]
    if missing:
        raise UsageError(f"attnkit serve needs {', '.join(missing)}: pip install 'attnkit[serve]'")


def fit_open_files(connections: int) -> None:
    """Raise the open-file limit to hold ``connections`` plus 128 other files, within the hard
    limit (UsageError when that is lower): accepts must not fail before the cap.
    """
    import resource

    need = connections + 128
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise UsageError(f"--max-connections {connections} needs {need:,} open files; this "
                             f"process may have {hard:,} (ulimit -Hn): give fewer")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def loaded_app(options: ServeOptions) -> Any:
    """`create_app`'s app on ``options.torch_threads()`` torch threads and one inter-op thread,
    with what is loaded frozen out of the garbage collector's passes (`gc.freeze`).
    """
    import torch

    from attnkit.server.app import create_app

    torch.set_num_threads(options.torch_threads())
    # torch allows it once, before any parallel work: a process that did some keeps its own.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    app = create_app(options)
    gc.collect()
    gc.freeze()
    # What a log record would look up on every line and no line shows (logging's own advice).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    return app


def listen(options: ServeOptions) -> socket.socket:
    """The listening socket of ``options.host:port`` (port 0: any free one).

    Raises:
        UsageError: the address cannot be used (in use, not this machine's, not allowed).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            options.host, options.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[0]
        # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say they
        # are TCP, and without it a keep-alive client waits for a delayed ACK per answer.
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
    """uvicorn's settings: the guarded protocol and its limits, the drain, and the log
    (uvicorn's lines and the server's on stderr, a repeated one once per 10 s; the access
    log's every line; each record one line, escaped: `attnkit.server.limits.OneLine`)."""
    from uvicorn.config import LOGGING_CONFIG, Config

    from attnkit.server.limits import GuardedHTTP

    log = copy.deepcopy(LOGGING_CONFIG)
    log["filters"] = {"repeated": {"()": "attnkit.server.limits.Repeated"},
                      "one_line": {"()": "attnkit.server.limits.OneLine"}}
    # The access log's every line, with uvicorn's "INFO:     " prefix but not its formatter,
    # which copies each record to colour it.
    log["formatters"]["line"] = {"format": "%(levelname)s:     %(message)s"}
    log["handlers"]["lines"] = {**log["handlers"]["default"], "formatter": "line",
                                "class": "attnkit.server.limits.Lines", "filters": ["one_line"]}
    log["handlers"]["default"]["filters"] = ["repeated", "one_line"]   # Repeated reads templates
    for name, handler in (("attnkit.server", "default"), ("asyncio", "default"),
                          ("attnkit.access", "lines")):
        log["loggers"][name] = {"handlers": [handler], "level": "INFO", "propagate": False}
    config = Config(app, lifespan="on", log_config=log, access_log=False, http=GuardedHTTP,
                    server_header=False,
                    timeout_graceful_shutdown=max(options.drain_seconds, 0.001), **more)
    config.serve = options   # `GuardedHTTP`'s limits; a worker gets them with the rest
    return config


def worker_app(options: ServeOptions, folder: str, parent: int) -> Any:
    """The app of one worker (uvicorn's factory, called in it): loaded, it says so in
    ``folder``; if it cannot load, it writes why and exits with uvicorn's start-up failure
    status, which stops the supervisor."""
    from uvicorn.config import STARTUP_FAILURE

    try:
        app = loaded_app(options)
    except AttnkitError as exc:
        with open(os.path.join(folder, ERROR_FILE), "a", encoding="utf-8") as f:
            f.write(f"{exc}\n")
        sys.exit(STARTUP_FAILURE)
    Path(folder, f"{READY}{os.getpid()}").touch()

    def watch() -> None:   # nobody else would stop it: it drains and stops
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, daemon=True, name="attnkit-parent-watch").start()
    return app


def _serve_workers(options: ServeOptions) -> int:
    from uvicorn.supervisors import Multiprocess

    from attnkit.server.prometheus import MULTIPROC_ENV
    from attnkit.server.state import check_run

    for spec in options.runs:
        check_run(spec, options)
    sock = listen(options)
    folder = tempfile.mkdtemp(prefix="attnkit-serve-")
    os.environ[MULTIPROC_ENV] = folder   # before the spawn: the workers inherit it
    factory = functools.partial(worker_app, options, folder, os.getpid())
    supervisor = Multiprocess(uvicorn_config(factory, options, factory=True,
                                             workers=options.workers), sockets=[sock])

    def say_when_ready() -> None:
        while not supervisor.should_exit.wait(0.1):
            if len(list(Path(folder).glob(READY + "*"))) >= options.workers:
                return _say_serving(sock, options, "")
    threading.Thread(target=say_when_ready, daemon=True).start()
    try:
        supervisor.run()
        if Path(folder, ERROR_FILE).exists():
            raise UsageError(Path(folder, ERROR_FILE).read_text(encoding="utf-8").split("\n")[0])
        return 0
    finally:
        sock.close()
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _say_serving(sock: socket.socket, options: ServeOptions, runs: str) -> None:
    host, port = sock.getsockname()[:2]
    threads, n = options.torch_threads(), options.workers
    print(f"attnkit: serving {runs}on http://{f'[{host}]' if ':' in host else host}:{port} "
          f"({n} process{'es' * (n > 1)}, {threads} thread{'s' * (threads != 1)}"
          f"{' each' * (n > 1)}; the live page at /, the API docs at /docs)",
          file=sys.stderr, flush=True)
