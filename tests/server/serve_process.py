"""``attnkit serve`` as a real process on a free loopback port, for the tests that need one
(signals, workers, the browser): started, waited for, and always stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import attnkit

SRC = Path(attnkit.__file__).resolve().parents[1]
SERVING = re.compile(r"attnkit: serving .*?on (http://\S+)")


def attnkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnkit.cli.main", *args]


def env() -> dict[str, str]:
    """The test's attnkit (this checkout's), one thread each, no proxy for loopback."""
    out = {**os.environ, "PYTHONPATH": str(SRC), "NO_PROXY": "127.0.0.1,localhost"}
    out.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return out


class ServeProcess:
    """``attnkit serve ARGS --port 0``; ``url`` once it listens; stderr kept in ``lines``."""

    def __init__(self, *args: str, timeout: float = 120):
        self.proc = subprocess.Popen(attnkit_command("serve", *args, "--port", "0"),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env())
        self.lines: list[str] = []
        self.url: str | None = None
        found = threading.Event()

        def read() -> None:
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                match = SERVING.search(line)
                if match:
                    self.url = match.group(1)
                    found.set()
            found.set()
        threading.Thread(target=read, daemon=True).start()
        found.wait(timeout)
        if self.url is None:
            self.stop(signal.SIGKILL)
            raise RuntimeError("attnkit serve did not start:\n" + "\n".join(self.lines))

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(30)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(condition, timeout: float = 30, every: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(every)
    return False
