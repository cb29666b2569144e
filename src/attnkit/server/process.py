"""The parts of one server process: the web stack's presence, the listening socket, uvicorn
configured to drain (`build_server`), and the signals that stop it. `attnkit.server.main.serve`
puts them together, and `attnkit.server.workers` does for ``--workers N``.

Stopping: the first SIGTERM or SIGINT stops accepting connections, marks the server draining
(``/readyz`` answers 503), lets every request in flight finish, streams included, for at most
``--drain-seconds``, then stops the queues and the model thread and returns: the process exits
0. (uvicorn would re-raise the signal after its own shutdown, so that the process dies of it
with status 143 or 130; a drained server has done its job, hence the handler here.) A second
signal stops at once.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

from attnkit.errors import UsageError
from attnkit.server.options import ServeOptions

log = logging.getLogger("attnkit.server")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def require_web_stack() -> None:
    """Raises:
        UsageError: FastAPI, uvicorn, prometheus-client or python-multipart is missing.
    """
    from importlib.util import find_spec

    missing = [package for module, package in (
        ("fastapi", "fastapi"), ("uvicorn", "uvicorn"), ("prometheus_client", "prometheus-client"),
        ("python_multipart", "python-multipart")) if find_spec(module) is None]
    if missing:
        raise UsageError(f"attnkit serve needs {', '.join(missing)}: pip install "
                         "'attnkit[serve]'")


def listen(options: ServeOptions) -> socket.socket:
    """The bound, listening socket of ``options.host``:``options.port`` (port 0: any free
    one).

    Raises:
        UsageError: the address cannot be used (in use, not this machine's, not allowed).
    """
    try:
        infos = socket.getaddrinfo(options.host, options.port, type=socket.SOCK_STREAM,
                                   proto=socket.IPPROTO_TCP)
        family, kind, proto, _, address = infos[0]
        # The protocol named (IPPROTO_TCP, not 0): asyncio sets TCP_NODELAY only on sockets
        # that say they are TCP, and without it a keep-alive client waits ~40 ms per answer
        # (Nagle's algorithm against delayed ACKs).
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        raise UsageError(f"cannot listen on {options.host}:{options.port} "
                         f"({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


def address_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def log_config() -> dict[str, Any]:
    """uvicorn's logging, with the server's own logger on the same lines (stderr)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["attnkit.server"] = {"handlers": ["default"], "level": "INFO",
                                           "propagate": False}
    return config


def build_server(app: Any, options: ServeOptions, *, parent: int | None = None) -> Any:
    """A uvicorn server of ``app`` that stops as the module docstring says (``parent``: a
    worker's supervisor; the worker stops if it goes away)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {sig: signal.signal(sig, self.stop) for sig in STOP_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

        def stop(self, signum: int, frame: Any) -> None:
            if self.should_exit:
                self.force_exit = True     # a second signal: stop now
            self.should_exit = True
            app.state.server.draining = True
            log.info("%s: draining (at most %g s), then stopping",
                     signal.Signals(signum).name, options.drain_seconds)

        async def on_tick(self, counter: int) -> bool:
            if parent is not None and os.getppid() != parent:
                self.should_exit = True    # the supervisor is gone: nobody will stop us
                app.state.server.draining = True
            return await super().on_tick(counter)

    config = uvicorn.Config(app, lifespan="on", log_config=log_config(), access_log=False,
                            timeout_graceful_shutdown=max(options.drain_seconds, 0.001),
                            loop="auto", http="auto", server_header=False)
    return Server(config)
