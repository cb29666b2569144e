"""What ``attnkit serve`` is told: `ServeOptions`, a plain dataclass of every setting with its
default (the command's help shows them), checked in one place for the command line, the app and
the tests. It imports no web stack, so ``attnkit --help`` works without the ``serve`` extra.

Example:
    ```python
    options = ServeOptions(runs=[parse_run("fr=runs/fr")], max_batch=32).check()
    ```
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import read_regular_file

ENGINES = ("attnkit", "ctranslate2")
MIN_KEY_CHARS = 16   # a shorter bearer key is guessable
# A key file is a few lines: a larger one, or a device such as /dev/zero, is refused unread.
MAX_KEYS, MAX_KEYS_BYTES = 1000, 64 << 10
IMAGE_CHARS = 1000   # what an image weighs in --max-batch-chars, as characters of text


@dataclass(frozen=True)
class RunSpec:
    """One ``--run``: its name in requests, and its folder (or a translate run's export)."""

    name: str
    path: Path


def parse_run(text: str) -> RunSpec:
    """``NAME=PATH`` or ``PATH`` (named then by the folder).

    Raises:
        UsageError: an empty path or name, or a name other than letters, digits, ``-``, ``_``
            and ``.`` (at most 100).
    """
    name, sep, path = text.partition("=") if "=" in text else ("", "", text)
    if not path or (sep and not name):
        raise UsageError(f"--run {text!r}: give a run folder (PATH or NAME=PATH)")
    name = name or Path(path).resolve().name
    if not all(c.isalnum() or c in "-_." for c in name) or len(name) > 100:
        raise UsageError(f"--run {text!r}: a run name is letters, digits, '-', '_' and '.' "
                         "(at most 100)")
    return RunSpec(name, Path(path))


def ip_of(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` (``[::1]`` too) as an IP address; None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, ``127.x``, ``::1``;
    not a name, which may resolve to anything)."""
    return host == "localhost" or getattr(ip_of(host), "is_loopback", False)


def read_api_keys(path: str | os.PathLike) -> frozenset[str]:
    """The keys of ``--api-keys FILE``: one a line; blank lines and ``#`` comments skipped.

    Raises:
        UsageError: a file that is missing, not a regular file, over 64 KiB or 1,000 keys, not
            UTF-8, without a key, or with a key shorter than 16 characters or holding spaces.
    """
    try:
        text = read_regular_file(path, "the --api-keys file", limit=MAX_KEYS_BYTES).decode("utf-8")
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: the --api-keys file is not UTF-8 text") from None
    keys = [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    if not keys or len(keys) > MAX_KEYS:
        raise UsageError(f"--api-keys {path}: {len(keys):,} keys; give 1 to {MAX_KEYS:,}, "
                         "one a line")
    for i, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise UsageError(f"--api-keys {path}: key {i} is shorter than {MIN_KEY_CHARS} "
                             "characters or holds a space; use long random keys "
                             "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return frozenset(keys)


# --compile: auto serves at once eagerly and switches to compiled decoding once it is loaded or
# built in the background; on has it before answering; off never compiles.
COMPILE = ("auto", "on", "off")


@dataclass
class ServeOptions:
    """Every setting of a server with its default (``attnkit serve --help`` says what each
    does); ``api_keys`` holds the keys (empty: none asked); times are seconds but for
    ``max_wait_ms``."""

    runs: list[RunSpec] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8000
    engine: str | None = None
    device: str | None = None
    compile: str = "auto"
    workers: int = 1
    threads: int | None = None
    max_batch: int = 64
    max_batch_chars: int = 16384
    max_wait_ms: float = 0.0
    max_queue: int = 512
    timeout_s: float = 30.0
    max_body_bytes: int = 1 << 20
    max_texts: int = 64
    max_chars: int = 2000
    max_image_bytes: int = 10 << 20
    max_pixels: int = 25_000_000
    max_connections: int = 1000
    header_timeout_s: float = 10.0
    body_timeout_s: float = 20.0
    allowed_hosts: tuple[str, ...] = ()
    api_keys: frozenset[str] = frozenset()
    insecure: bool = False
    drain_seconds: float = 30.0
    access_log: bool = True

    def check(self) -> ServeOptions:
        """Refuse what cannot work, with one line naming the option; returns self.

        Raises:
            UsageError: no run, two runs of one name, a number out of range, an unknown
                engine, or a non-loopback host without ``--api-keys`` (unless ``--insecure``).
        """
        names = [r.name for r in self.runs]
        if not names:
            raise UsageError("give at least one run to serve (--run RUN)")
        for name in names:
            if names.count(name) > 1:
                raise UsageError(f"two runs are named {name!r}: name them with --run NAME=PATH")
        for name, allowed in (("engine", (None, *ENGINES)), ("compile", COMPILE)):
            if getattr(self, name) not in allowed:
                raise UsageError(f"--{name} must be one of {', '.join(filter(None, allowed))}; "
                                 f"got {getattr(self, name)!r}")
        for name in ("port", "workers", "max_batch", "max_batch_chars", "max_queue",
                     "max_body_bytes", "max_texts", "max_chars", "max_image_bytes", "max_pixels",
                     "max_connections", "threads"):
            value, low = getattr(self, name), 0 if name == "port" else 1
            if (isinstance(value, bool) or not isinstance(value, int) or value < low) and not (
                    name == "threads" and value is None):
                raise UsageError(f"{_flag(name)} must be a whole number of at least {low}, got "
                                 f"{value!r}")
        if self.port > 65535:
            raise UsageError(f"--port must be at most 65535, got {self.port}")
        # Waits may be 0; a deadline must leave some time.
        for name, zero in (("max_wait_ms", True), ("drain_seconds", True), ("timeout_s", False),
                           ("header_timeout_s", False), ("body_timeout_s", False)):
            value = getattr(self, name)
            if not (value >= 0 if zero else value > 0):
                raise UsageError(f"{_flag(name)} must be {'at least' if zero else 'more than'} "
                                 f"0, got {value!r}")
        for host in self.allowed_hosts:
            if not host or len(host) > 253 or not all(c.isalnum() or c in "-._:[]" for c in host):
                raise UsageError(f"--allowed-host {host!r}: give a host name or address as "
                                 "a client's Host header names it (no port)")
        if not is_loopback(self.host) and not self.api_keys and not self.insecure:
            raise UsageError(f"--host {self.host} is reachable from other machines: give "
                             "--api-keys FILE (or --insecure to serve without keys)")
        return self

    def torch_threads(self) -> int:
        """``threads``, or the cores shared by the ``workers`` (more only makes them take
        turns)."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
        return self.threads or max(1, cores // self.workers)

    def limits(self) -> dict[str, float]:
        """The limits a client must keep (``GET /v1/models`` shows them)."""
        return {k: getattr(self, k) for k in ("max_body_bytes", "max_texts", "max_chars",
                                              "max_image_bytes", "max_pixels", "max_batch",
                                              "max_batch_chars", "max_queue", "timeout_s")}


def _flag(name: str) -> str:
    """The command-line flag of a field (``timeout_s`` -> ``--timeout``)."""
    return "--" + name.removesuffix("_s").replace("_", "-")
