"""What a client may hold of a server: connections, the time to send a request's headers, the
log lines it causes, and a request's body bytes, texts, characters and image.

uvicorn closes a kept-alive connection idle for ``timeout_keep_alive`` (any byte restarts that
clock), refuses headers over ``h11_max_incomplete_event_size`` (16 KiB) and, with
``limit_concurrency``, answers 503 in plain text once a request's headers are all in. It bounds
neither the time to send them nor the connections that never do: 21,000 such clients held
every file the process may open, ``/healthz`` timed out and the log grew 4 MB a second.
`GuardedHTTP`, uvicorn's own HTTP protocol (its ``http`` setting takes the class) with the two
limits of `GuardedConfig`, closes a connection whose headers are not all in
``header_timeout`` seconds after it opened or was last answered, however slowly it trickles,
and answers a connection beyond ``max_connections`` 503 in the API's JSON before reading
anything, so the accept loop goes on. `Repeated`, a logging filter, writes a message repeated
within its interval once, then with a count.

`BodyLimit` answers a ``Content-Length`` over the limit at once and counts a body sent without
one as it arrives, so no request makes the server buffer more (``--max-body-bytes``; the image
route's is ``--max-image-bytes`` and `FORM_OVERHEAD`). FastAPI's own ``max_body_size`` answers
such a request in plain text, not in the API's JSON. A small file can declare a huge image (a
500 KB PNG of 13,000 x 13,000 pixels decodes to 500 MB): `checked_image` reads the header only.
"""

from __future__ import annotations

import io
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

from uvicorn import Config
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from attnkit.server.errors import ApiError, error_response
from attnkit.server.options import ServeOptions

log = logging.getLogger("attnkit.server")
FORM_OVERHEAD = 64 << 10   # the multipart form around an image: boundaries, other fields
REFUSED = (b'{"error": {"code": "too_many_connections", "message": "the server holds as many '
           b'connections as it may; retry later"}}')
REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
           b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
           % (len(REFUSED), REFUSED))


class GuardedConfig(Config):
    """uvicorn's settings and the two limits `GuardedHTTP` reads (a worker gets them with
    the rest: uvicorn hands its settings to the processes it spawns)."""

    def __init__(self, app: Any, *, max_connections: int, header_timeout: float, **kw: Any):
        super().__init__(app, **kw)
        self.max_connections, self.header_timeout = max_connections, header_timeout


class GuardedHTTP(AutoHTTPProtocol):
    """uvicorn's HTTP protocol with a header deadline and a connection cap."""

    refused = False
    _deadline: Any = None

    def connection_made(self, transport: Any) -> None:
        if len(self.connections) >= self.config.max_connections:
            self.refused = True
            transport.write(REFUSAL)
            transport.close()
            log.warning("refused a connection: %d are open (--max-connections)",
                        len(self.connections))
            return
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()   # the next request's headers have the same time

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return   # never opened as far as uvicorn knows
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.config.header_timeout, self._late)

    def _late(self) -> None:
        # Closed unless a request whose headers all came is being answered (idle counts too).
        if (self.cycle is None or self.cycle.response_complete) and \
                not self.transport.is_closing():
            log.warning("closed a connection that sent no complete request headers in %g s "
                        "(--header-timeout)", self.config.header_timeout)
            self.transport.close()


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


class BodyLimit:
    """The ASGI middleware that caps every body (module docstring)."""

    def __init__(self, app: Any, options: ServeOptions):
        self.app, self.options = app, options

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        o = self.options
        limit = o.max_body_bytes if scope["path"] != "/v1/caption" else (
            o.max_image_bytes + FORM_OVERHEAD)
        over = ApiError(413, "body_too_large", f"the request body is over the limit of "
                                               f"{limit:,} bytes")
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            error = over if declared.isdigit() else ApiError(
                400, "bad_request", "the Content-Length header is not a number")
            return await error_response(error.status_code, error.code, error.detail)(
                scope, receive, send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise over   # inside FastAPI's body reading: its error handlers answer it
            return message
        await self.app(scope, counted, send)


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
