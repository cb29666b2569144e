"""What any client can hold of a server process: connections, the time to send a request's
headers, and the log lines it causes.

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
"""

from __future__ import annotations

import logging
import time
from typing import Any

from uvicorn import Config
from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger("attnkit.server")
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
