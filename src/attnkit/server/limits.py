"""What a client may hold of a server: connections, header and body time, log lines, and a
request's headers, host, body bytes, texts and image (docs/guide/serve.md, "Errors and limits").

`GuardedHTTP` adds to uvicorn the deadlines and connection cap it lacks; `RequestLimits` (ASGI)
refuses large headers, unknown hosts and large bodies; `Repeated`, `OneLine` and `Lines` keep the
log bounded and one line a record.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import re
import time
import warnings
from collections.abc import Sequence
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from attnkit.server.errors import ApiError, error_response, log, raw_error
from attnkit.server.options import ServeOptions, ip_of, is_loopback

FORM_OVERHEAD = 64 << 10   # the multipart form around an image: boundaries, other fields
MAX_HEADER_BYTES = 16 << 10   # a request's line and headers, in all
BODY_LATE = "attnkit.body_late"   # set in a request's scope when its body deadline passed
REFUSAL = raw_error(503, "too_many_connections", "the server holds as many connections as it "
                    "may; retry later", {"retry-after": "1"})
BAD_REQUEST = raw_error(400, "bad_request", "the request is not valid HTTP/1.1: a malformed "
                        "request line or header (such as a Content-Length that is not a "
                        "number), or headers over 16 KiB")


class GuardedHTTP(AutoHTTPProtocol):
    """uvicorn's HTTP protocol with a header deadline, a body deadline, a connection cap, and
    its own 400 (a request it cannot parse) in the API's JSON; its limits are the
    `ServeOptions` that `attnkit.server.main.uvicorn_config` sets as ``config.serve``."""

    refused = False
    _deadline: Any = None   # one timer per connection, moved only when it fires (`_late`)
    _due = 0.0              # when the time of what the connection is sending now ends
    _timed: Any = None      # the request whose body that is

    def connection_made(self, transport: Any) -> None:
        if len(self.connections) >= self.config.serve.max_connections:
            self.refused = True
            transport.write(REFUSAL)
            transport.close()
            log.warning("refused a connection: %d are open (--max-connections)",
                        len(self.connections))
            return
        super().connection_made(transport)
        self._arm(self.config.serve.header_timeout_s)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and self.cycle is not self._timed:
            self._timed = self.cycle   # its headers are in: its body has its own time
            self._arm(self.config.serve.body_timeout_s)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm(self.config.serve.header_timeout_s)   # the next request's headers have the same

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return   # never opened as far as uvicorn knows
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self.transport.write(BAD_REQUEST)
        self.transport.close()

    def _arm(self, seconds: float) -> None:
        # A request costs no timer of its own: only a deadline sooner than the timer's moves it.
        self._due = self.loop.time() + seconds
        if self._deadline is None or self._deadline.when() > self._due:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_at(self._due, self._late)

    def _late(self) -> None:
        self._deadline, cycle = None, self.cycle
        if self.transport.is_closing():
            return
        if self.loop.time() < self._due:   # moved on since: the rest of the new time
            self._deadline = self.loop.call_at(self._due, self._late)
            return
        if cycle is None or cycle.response_complete:   # no request's headers (idle too)
            log.warning("closed a connection that sent no complete request headers in %g s "
                        "(--header-timeout)", self.config.serve.header_timeout_s)
            self.transport.close()
        elif cycle is not self._timed:   # a pipelined request, begun without new bytes
            self._timed = cycle
            self._arm(self.config.serve.body_timeout_s)
        elif cycle.more_body and not cycle.response_started:
            if cycle.scope.get(BODY_LATE):   # told, and still no answer
                self.transport.close()
                return
            log.warning("answered 408 to a request whose body was not all in %g s "
                        "(--body-timeout)", self.config.serve.body_timeout_s)
            # The app reading the body answers 408 (`RequestLimits`); woken here.
            cycle.scope[BODY_LATE] = True
            cycle.message_event.set()
            self._arm(1.0)


class Repeated(logging.Filter):
    """Leaves out a message (template, level, logger) written less than ``interval`` seconds
    ago; the next one written says how many were."""

    def __init__(self, interval: float = 10.0):
        super().__init__()
        self.interval = interval
        self._last: dict[tuple, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key, now = (record.name, record.levelno, str(record.msg)), time.monotonic()
        written, left_out = self._last.get(key, (float("-inf"), 0))
        if now - written < self.interval:
            self._last[key] = (written, left_out + 1)
            return False
        if len(self._last) > 1000:
            self._last.clear()   # templates are few; this bounds messages built per event
        self._last[key] = (now, 0)
        if left_out:
            record.msg = f"{record.msg} (and {left_out:,} more like it in {now - written:.0f} s)"
        return True


class OneLine(logging.Filter):
    """Makes every record one line of printable text: its message and any traceback, their
    control characters escaped (`printable`), so that no client text can forge or flood
    lines. Put after `Repeated`, which reads the template."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = printable(logging.Formatter().format(record)), None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


class Lines(logging.StreamHandler):
    """A stream handler that writes the records of one turn of the event loop together: the
    answers of a batch cost one write, not one per request. Without a running loop (another
    thread, the end of the process), a record is written at once."""

    def __init__(self, stream: Any = None):
        super().__init__(stream)
        self._held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return super().emit(record)
        try:
            line = self.format(record)
        except Exception:   # logging's rule: a record that cannot be formatted is reported
            return self.handleError(record)
        if not self._held:
            loop.call_soon(self.flush)
        self._held.append(line)

    def flush(self) -> None:
        with self.lock:
            if self._held:
                lines, self._held = self._held, []
                self.stream.write(self.terminator.join(lines) + self.terminator)
            super().flush()


ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` on one line: control characters (C0, DEL, C1, Unicode line and paragraph
    separators) escaped as ``\\n``, ``\\x1b``, ``\\u2028``...; with ``limit``, cut to as many
    characters, saying how many more there were."""
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit:,} more characters)"
    return CONTROL.sub(lambda m: ESCAPES.get(m[0]) or (
        f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}"), text)


class Hosts:
    """The ``Host`` values a server without keys answers: its bound name or address, ``localhost``,
    ``--allowed-host`` names and an address of the kind it listens on (refusing DNS rebinding).
    """

    def __init__(self, options: ServeOptions):
        bound = options.host.strip("[]").lower()
        self.names = {"localhost", bound, *(h.strip("[]").lower().rstrip(".")
                                           for h in options.allowed_hosts)}
        self.loopback = is_loopback(options.host)
        self.wildcard = getattr(ip_of(bound), "is_unspecified", False)
        self.allows = functools.lru_cache(1024)(self._allows)   # any value a client likes

    def _allows(self, value: bytes) -> bool:
        host = value.decode("latin-1").lower()
        name = host.rpartition("]")[0].lstrip("[") if host.startswith("[") else (
            host.rpartition(":")[0] if host.count(":") == 1 else host)
        name = name.rstrip(".")
        ip = ip_of(name)   # None: a name
        return name in self.names or (ip is not None and (
            self.wildcard or (self.loopback and ip.is_loopback)))


class RequestLimits:
    """The ASGI middleware that checks a request before the app reads it (module docstring):
    its headers' size, its ``Host`` (`Hosts`, without keys), its declared body size, and, as
    the body arrives, its size and its deadline."""

    def __init__(self, app: Any, options: ServeOptions):
        self.app = app
        self.limit, self.image_limit = options.max_body_bytes, (options.max_image_bytes
                                                                + FORM_OVERHEAD)
        self.hosts = None if options.api_keys else Hosts(options)
        self.body_timeout = options.body_timeout_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        size = (len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
                + sum(len(name) + len(value) + 4 for name, value in scope["headers"]))
        headers = dict(scope["headers"])   # the last of a name, as ever
        limit = self.limit if scope["path"] != "/v1/caption" else self.image_limit
        error = self._refused(size, headers.get(b"host"), headers.get(b"content-length"), limit)
        if error is not None:
            return await error_response(error.status_code, error.code, error.detail,
                                        error.headers)(scope, receive, send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise self._over(limit)   # inside FastAPI's body reading: its handlers answer
            if message.get("more_body") and scope.get(BODY_LATE):   # `GuardedHTTP` says so
                raise ApiError(408, "body_timeout", f"the request's body did not arrive within "
                               f"the server's {self.body_timeout:g} s", {"connection": "close"})
            return message
        await self.app(scope, counted, send)

    def _refused(self, size: int, host: bytes | None, declared: bytes | None, limit: int
                 ) -> ApiError | None:
        if size > MAX_HEADER_BYTES:
            return ApiError(400, "headers_too_large", f"the request's line and headers hold "
                            f"{size:,} bytes; the limit is {MAX_HEADER_BYTES:,}",
                            {"connection": "close"})
        if self.hosts is not None and host is not None and not self.hosts.allows(host):
            return ApiError(421, "unknown_host", f"this server does not answer for the host "
                            f"{printable(host.decode('latin-1'), 100)!r}: it serves without "
                            "keys, so it answers only its own names (--allowed-host adds one)")
        if declared is not None and not declared.isdigit():
            return ApiError(400, "bad_request", "the Content-Length header is not a number")
        if declared is not None and int(declared) > limit:
            return self._over(limit)
        return None

    @staticmethod
    def _over(limit: int) -> ApiError:
        return ApiError(413, "body_too_large", f"the request body is over the limit of "
                                               f"{limit:,} bytes")


def check_texts(texts: Sequence[str], options: ServeOptions, what: str = "text") -> None:
    """Raises:
        ApiError: 413 for more than ``max_texts`` texts or one over ``max_chars`` characters.
    """
    if len(texts) > options.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what}s in one request; the "
                                              f"limit is {options.max_texts}")
    for i, text in enumerate(texts):
        if len(text) > options.max_chars:
            raise ApiError(413, "text_too_long", f"{what} {i} has {len(text):,} characters; "
                                                 f"the limit is {options.max_chars:,}")


def checked_image(data: bytes, options: ServeOptions) -> str:
    """The image format of ``data`` (``"PNG"``...), from its header alone.

    Raises:
        ApiError: 413 over ``max_image_bytes`` or ``max_pixels``; 415 not an image; 422 empty.
    """
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise ApiError(422, "empty_image", "the uploaded image file is empty")
    if len(data) > options.max_image_bytes:
        raise ApiError(413, "image_too_large", f"the image file has {len(data):,} bytes; the "
                                               f"limit is {options.max_image_bytes:,}")
    try:
        with warnings.catch_warnings():
            # Pillow's own warning for large images: the budget below answers instead.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                width, height, fmt = im.width, im.height, im.format
    except Image.DecompressionBombError as exc:
        raise ApiError(413, "too_many_pixels", f"the image declares too many pixels ({exc})"
                       ) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise ApiError(415, "not_an_image", "the uploaded file is not an image this server "
                                            "reads (PNG, JPEG, GIF, BMP, WebP, TIFF...)") from None
    if width * height > options.max_pixels:
        raise ApiError(413, "too_many_pixels", f"the image is {width} x {height} pixels; the "
                                               f"limit is {options.max_pixels:,} pixels")
    return fmt or "image"
