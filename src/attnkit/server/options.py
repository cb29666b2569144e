"""What ``attnkit serve`` is told: `ServeOptions`, a plain dataclass of every setting with its
default (the command's help shows them), checked in one place for the command line, the app and
the tests. It imports no web stack, so ``attnkit --help`` works without the ``serve`` extra.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import read_regular_file
from attnkit.settings import check_settings, is_int, setting

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
    """``NAME=PATH`` or ``PATH`` (named then by the folder); UsageError for an empty path or
    name, or a name other than letters, digits, ``-``, ``_`` and ``.`` (at most 100)."""
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
AT_LEAST_0, MORE_THAN_0 = (lambda v: v >= 0, "at least 0"), (lambda v: v > 0, "more than 0")


@dataclass
class ServeOptions:
    """Every setting of a server with its default and bounds (``attnkit serve --help`` says
    what each does); ``api_keys`` holds the keys (empty: none asked); times are seconds but for
    ``max_wait_ms``."""

    runs: list[RunSpec] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = setting(8000, valid=(lambda v: is_int(v) and 0 <= v <= 65535,
                                     "an integer from 0 to 65535"))
    engine: str | None = setting(None, choices=ENGINES)
    device: str | None = None
    compile: str = setting("auto", choices=COMPILE)
    workers: int = setting(1, low=1)
    threads: int | None = setting(None, low=1)
    max_batch: int = setting(64, low=1)
    max_batch_chars: int = setting(16384, low=1)
    max_wait_ms: float = setting(0.0, valid=AT_LEAST_0)
    max_queue: int = setting(512, low=1)
    timeout_s: float = setting(30.0, valid=MORE_THAN_0, flag="--timeout")
    max_body_bytes: int = setting(1 << 20, low=1)
    max_texts: int = setting(64, low=1)
    max_chars: int = setting(2000, low=1)
    max_image_bytes: int = setting(10 << 20, low=1)
    max_pixels: int = setting(25_000_000, low=1)
    max_connections: int = setting(1000, low=1)
    header_timeout_s: float = setting(10.0, valid=MORE_THAN_0, flag="--header-timeout")
    body_timeout_s: float = setting(20.0, valid=MORE_THAN_0, flag="--body-timeout")
    allowed_hosts: tuple[str, ...] = ()
    api_keys: frozenset[str] = frozenset()
    insecure: bool = False
    drain_seconds: float = setting(30.0, valid=AT_LEAST_0)
    access_log: bool = True

    def check(self) -> ServeOptions:
        """Returns self; UsageError (one line naming the option) for no run, two runs of one
        name, a value out of its bounds, or a non-loopback host without keys or ``--insecure``.
        """
        names = [r.name for r in self.runs]
        if not names:
            raise UsageError("give at least one run to serve (--run RUN)")
        for name in names:
            if names.count(name) > 1:
                raise UsageError(f"two runs are named {name!r}: name them with --run NAME=PATH")
        check_settings(self)
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

