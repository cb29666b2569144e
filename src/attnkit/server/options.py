"""What ``attnkit serve`` is told: the runs, the address, the batching, the limits, the keys.

`ServeOptions` holds every setting with its default and checks them in one place (`check`), so
the command line, `attnkit.server.app.create_app` and the tests share one set of rules. Nothing
here imports the web stack: ``attnkit --help`` works without the ``serve`` extra.

Example:
    ```python
    options = ServeOptions(runs=[parse_run("fr=runs/fr")], max_batch=32, max_wait_ms=5)
    options.check()
    ```
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.errors import UsageError

ENGINES = ("attnkit", "ctranslate2")
# Bearer keys shorter than this are guessable; a key file holding one is refused.
MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class RunSpec:
    """One ``--run``: the name clients use for it and its folder.

    Attributes:
        name: the run's name in requests (``"run": NAME``) and in ``/v1/models``.
        path: the run folder (or a CTranslate2 export of a translate run).
    """

    name: str
    path: Path


def parse_run(text: str) -> RunSpec:
    """``NAME=PATH`` or ``PATH`` (then the name is the folder's own name).

    Raises:
        UsageError: an empty path or name, or a name other than letters, digits, ``-``,
            ``_`` and ``.``.
    """
    name, sep, path = text.partition("=")
    if not sep:
        name, path = "", text
    if not path or (sep and not name):
        raise UsageError(f"--run {text!r}: give a run folder (PATH or NAME=PATH)")
    folder = Path(path)
    name = name or folder.resolve().name
    if not all(c.isalnum() or c in "-_." for c in name) or len(name) > 100:
        raise UsageError(f"--run {text!r}: a run name is letters, digits, '-', '_' and '.' "
                         "(at most 100)")
    return RunSpec(name, folder)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, ``127.x``,
    ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False   # a name: it may resolve to anything


def read_api_keys(path: str | os.PathLike) -> frozenset[str]:
    """The keys of ``--api-keys FILE``: one a line; blank lines and ``#`` comments skipped.

    Raises:
        UsageError: an unreadable file, no key in it, or a key shorter than 16 characters or
            holding spaces.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--api-keys {path}: cannot read it ({exc})") from None
    keys = [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    if not keys:
        raise UsageError(f"--api-keys {path}: no key in it (one key a line)")
    for i, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise UsageError(f"--api-keys {path}: key {i} is shorter than {MIN_KEY_CHARS} "
                             "characters or holds a space; use long random keys "
                             "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return frozenset(keys)


@dataclass
class ServeOptions:
    """Every setting of a server, with its default.

    Attributes:
        runs: the runs to serve (at least one).
        host, port: where to listen (loopback by default).
        engine: the translation engine (None: attnkit, or CTranslate2 for an exported folder).
        device: where the models run (``cpu`` by default).
        workers: server processes on this machine, each with every model.
        threads: torch threads per process (None: the cores divided by ``workers``).
        max_batch: the most inputs one model call takes (1: no batching).
        max_wait_ms: how long a request may wait for others to share its batch.
        max_queue: the most requests one model holds waiting or running; more get 429.
        timeout_s: a request not answered within this many seconds gets 503.
        max_body_bytes: the largest JSON body.
        max_texts: the most texts in one request.
        max_chars: the most characters in one text.
        max_image_bytes: the largest uploaded image file.
        max_pixels: the most pixels an image may declare (checked before decoding it).
        api_keys: accepted bearer keys (empty: no key asked).
        insecure: allow a non-loopback host without keys.
        drain_seconds: on SIGTERM or SIGINT, how long requests in flight may take to finish.
    """

    runs: list[RunSpec] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8000
    engine: str | None = None
    device: str | None = None
    workers: int = 1
    threads: int | None = None
    max_batch: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 512
    timeout_s: float = 30.0
    max_body_bytes: int = 1 << 20
    max_texts: int = 64
    max_chars: int = 2000
    max_image_bytes: int = 10 << 20
    max_pixels: int = 25_000_000
    api_keys: frozenset[str] = frozenset()
    insecure: bool = False
    drain_seconds: float = 30.0

    def check(self) -> ServeOptions:
        """Refuse what cannot work, each with one line naming the option; returns self.

        Raises:
            UsageError: no run, two runs of one name, a number out of range, an unknown
                engine, or a non-loopback host without ``--api-keys`` (unless ``--insecure``).
        """
        if not self.runs:
            raise UsageError("give at least one run to serve (--run RUN)")
        names = [r.name for r in self.runs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UsageError(f"two runs are named {twice[0]!r}: name them with --run NAME=PATH")
        if self.engine is not None and self.engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}; got {self.engine!r}")
        for flag, value, low in (("--port", self.port, 0), ("--workers", self.workers, 1),
                                 ("--max-batch", self.max_batch, 1),
                                 ("--max-queue", self.max_queue, 1),
                                 ("--max-body-bytes", self.max_body_bytes, 1),
                                 ("--max-texts", self.max_texts, 1),
                                 ("--max-chars", self.max_chars, 1),
                                 ("--max-image-bytes", self.max_image_bytes, 1),
                                 ("--max-pixels", self.max_pixels, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"{flag} must be a whole number of at least {low}, got {value!r}")
        if self.port > 65535:
            raise UsageError(f"--port must be at most 65535, got {self.port}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be at least 1, got {self.threads}")
        for flag, value in (("--max-wait-ms", self.max_wait_ms),
                            ("--drain-seconds", self.drain_seconds)):
            if not value >= 0:
                raise UsageError(f"{flag} must be at least 0, got {value!r}")
        if not self.timeout_s > 0:
            raise UsageError(f"--timeout must be more than 0 seconds, got {self.timeout_s!r}")
        if not is_loopback(self.host) and not self.api_keys and not self.insecure:
            raise UsageError(f"--host {self.host} is reachable from other machines: give "
                             "--api-keys FILE (or --insecure to serve without keys)")
        return self

    def torch_threads(self) -> int:
        """``threads``, or the cores shared evenly by the ``workers`` processes (at least 1):
        more threads than cores only makes the processes take turns."""
        if self.threads is not None:
            return self.threads
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
        return max(1, cores // self.workers)

    def limits(self) -> dict[str, float]:
        """The limits a client must keep (``GET /v1/models`` shows them)."""
        return {"max_body_bytes": self.max_body_bytes, "max_texts": self.max_texts,
                "max_chars": self.max_chars, "max_image_bytes": self.max_image_bytes,
                "max_pixels": self.max_pixels, "max_batch": self.max_batch,
                "max_queue": self.max_queue, "timeout_s": self.timeout_s}
