"""``--workers N``: N server processes on one address, each with every model.

The supervisor (this process) binds the address once and starts N processes (spawned: a fresh
interpreter each, no forked torch state); each loads every run, fixes its threads
(``--threads``, by default the cores divided by N) and accepts connections on the shared
socket, so the kernel spreads connections over them. Start-up waits for all N: if one cannot
load a run, the others are stopped and the start fails with that one error line.

SIGTERM or SIGINT to the supervisor is passed to every worker as SIGTERM (each drains as
`attnkit.server.process` says); the supervisor exits 0 once all have. Workers sit in their own
process group, so a Ctrl-C in a terminal reaches them through the supervisor only (once), and
a worker whose supervisor died stops by itself. ``/metrics`` of any worker counts all of them
(prometheus-client's multiprocess mode, in a temporary folder the supervisor removes).

Example:
    ```python
    serve_workers(ServeOptions(runs=[parse_run("runs/fr")], workers=2, threads=1))
    ```
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

from attnkit.errors import AttnkitError, UsageError
from attnkit.server.metrics import MULTIPROC_ENV
from attnkit.server.options import ServeOptions
from attnkit.server.process import STOP_SIGNALS, address_of, build_server, listen

# How long the supervisor waits for the workers to load their models.
START_TIMEOUT_S = 600


def worker(options: ServeOptions, sock: socket.socket, started: Any, parent: int) -> None:
    """One worker process: load, report (``("ready", pid)`` or ``("error", line)``), serve."""
    os.setpgrp()
    from attnkit.server.app import create_app
    from attnkit.server.compute import set_threads
    from attnkit.server.runs import load_runs

    try:
        set_threads(options.torch_threads())
        app = create_app(options, load_runs(options))
    except AttnkitError as exc:
        started.put(("error", str(exc)))
        sys.exit(2)
    started.put(("ready", os.getpid()))
    build_server(app, options, parent=parent).run(sockets=[sock])


def serve_workers(options: ServeOptions) -> int:
    """Run ``options.workers`` processes until SIGTERM or SIGINT (module docstring); returns
    0 when every worker drained and exited 0, else 1.

    Raises:
        UsageError, CheckpointError: a worker could not start (its error line).
    """
    sock = listen(options)
    folder = tempfile.mkdtemp(prefix="attnkit-metrics-")
    os.environ[MULTIPROC_ENV] = folder   # before the spawn: the workers inherit it
    context = multiprocessing.get_context("spawn")
    started = context.Queue()
    procs = [context.Process(target=worker, args=(options, sock, started, os.getpid()),
                             name=f"attnkit-worker-{i}") for i in range(options.workers)]
    stopping = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM if len(stopping) == 1 else signal.SIGKILL)

    before = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        for p in procs:
            p.start()
        _wait_started(procs, started)
        threads = options.torch_threads()
        print(f"attnkit: serving on {address_of(sock)} ({options.workers} processes, {threads} "
              f"thread{'s' * (threads != 1)} each; the live page at /, the API docs at /docs)",
              file=sys.stderr, flush=True)
        sock.close()   # the workers hold it
        for p in procs:
            p.join()
        return 0 if all(p.exitcode == 0 for p in procs) else 1
    except BaseException:
        stop(signal.SIGTERM, None)
        for p in procs:
            p.join(timeout=options.drain_seconds + 5)
        raise
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_started(procs: list[Any], started: Any) -> None:
    """Wait for every worker's report; the first error (or a worker that died) stops all.

    Raises:
        UsageError: a worker's error line, or a worker that died without one.
    """
    ready = 0
    waited = 0.0
    while ready < len(procs):
        try:
            kind, value = started.get(timeout=0.5)
        except queue.Empty:
            waited += 0.5
            dead = [p for p in procs if p.exitcode is not None]
            if dead:
                raise UsageError(f"worker {dead[0].name} stopped while starting (exit status "
                                 f"{dead[0].exitcode})") from None
            if waited > START_TIMEOUT_S:
                raise UsageError(f"the workers did not start within {START_TIMEOUT_S} s"
                                 ) from None
            continue
        if kind == "error":
            raise UsageError(value)
        ready += 1
