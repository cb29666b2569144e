"""What a client can hold of a real ``attnkit serve`` process: connections that never finish
their headers are closed after ``--header-timeout``, bodies that never finish are answered 408
after ``--body-timeout``, beyond ``--max-connections`` a new one is answered 503 at once (the
accept loop never stalls), the log says a repeated warning once per interval with a count and
each line of client text as one escaped line, what the HTTP parser refuses is answered in the
API's JSON, and a request the server refuses (a lone surrogate) leaves its keep-alive
connection open for the next request."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import sys
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is missing")
pytest.importorskip("uvicorn", reason="the serve extra is missing")

pytestmark = pytest.mark.slow
PARTIAL = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def guarded(serve_process, tiny_runs):
    """A server that allows 8 connections and 1 s to send a request's headers or body."""
    with serve_process.ServeProcess("--run", f"translate={tiny_runs['translate'][0]}",
                                    "--threads", "1", "--max-connections", "8",
                                    "--header-timeout", "1", "--body-timeout", "1") as srv:
        yield srv


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` seconds (reads until EOF)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_incomplete_headers_are_closed_and_the_cap_answers_503_at_once(guarded,
                                                                       serve_process):
    # Connections that send part of their headers, one of them a byte every 0.3 s.
    held = [socket.create_connection(address(guarded.url)) for _ in range(8)]
    for sock in held:
        sock.sendall(PARTIAL)
    time.sleep(0.3)
    # At the cap: a new connection is answered at once, not left in the accept queue.
    for _ in range(20):
        with socket.create_connection(address(guarded.url), timeout=5) as extra:
            answer = extra.recv(4096)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert b'"too_many_connections"' in answer
    start = time.monotonic()
    for _ in range(3):
        held[0].sendall(b"X")          # trickled bytes do not extend the deadline
        time.sleep(0.3)
    assert all(closed_by_server(sock, timeout=5) for sock in held)
    assert time.monotonic() - start < 5
    for sock in held:
        sock.close()
    # Freed: the server answers again.
    assert serve_process.wait_until(lambda: _healthy(guarded.url), timeout=10)
    # 20 refusals and 8 closings: each warning written once (the next one, with its count,
    # only after the interval).
    refused = [line for line in guarded.lines if "refused a connection" in line]
    closed = [line for line in guarded.lines if "no complete request headers" in line]
    assert len(refused) == 1 and len(closed) == 1, guarded.lines


def answer_of(sock: socket.socket, timeout: float = 10) -> bytes:
    """All ``sock`` receives until the server closes it."""
    sock.settimeout(timeout)
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def json_error(answer: bytes, status: int) -> str:
    """The code of a raw HTTP answer's JSON error, after checking its status and type."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:300]
    assert b"content-type: application/json" in head.lower(), head
    return json.loads(body)["error"]["code"]


def test_a_body_sent_slowly_is_answered_408_and_closed(guarded, serve_process):
    """Issue #47 (4): 1,000 connections each sending a body byte every 5 s were all open
    after 40 s, and /healthz answered 503 too_many_connections. A body now has a deadline."""
    held = [socket.create_connection(address(guarded.url)) for _ in range(8)]
    for sock in held:
        sock.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{")
    for _ in range(5):                  # a byte each 0.3 s: past the 1 s deadline
        time.sleep(0.3)
        for sock in held:
            with contextlib.suppress(OSError):
                sock.sendall(b" ")
    for sock in held:
        assert json_error(answer_of(sock), 408) == "body_timeout"
        sock.close()
    assert serve_process.wait_until(lambda: _healthy(guarded.url), timeout=10)


def test_what_the_parser_refuses_is_a_json_error(guarded):
    """Issue #47 (10): "Content-Length: abc" was answered in plain text, and a 65,000-byte
    header 200, where the docs say 400 in the API's JSON over 16 KiB."""
    host = b"Host: 127.0.0.1\r\n"
    cases = [(b"POST /v1/translate HTTP/1.1\r\n" + host + b"Content-Length: abc\r\n\r\n{}",
              "bad_request"),
             (b"GET /healthz HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * 65_000 + b"\r\n\r\n",
              "headers_too_large"),
             (b"GET /healthz HTTP/1.1\r\n" + host + b"X-A: " + b"a" * 9_000 + b"\r\n", None)]
    for request, code in cases:
        with socket.create_connection(address(guarded.url)) as sock:
            sock.sendall(request)
            if code is None:            # headers over 16 KiB, still incomplete: the parser's
                time.sleep(0.2)
                sock.sendall(b"X-B: " + b"b" * 9_000 + b"\r\n")
            assert json_error(answer_of(sock), 400) == (code or "bad_request")


def test_client_text_in_the_log_is_one_escaped_line(guarded, serve_process):
    """Issue #47 (5): a path with %0a wrote a forged access line; ESC, BEL and CR reached the
    log raw; one request with 3,000 %0a added 2,986 lines."""
    before = len(guarded.lines)
    path = "/forged%0aINFO:%20%20%20%20%20GET%20/x%20200%201.0%20ms%1b[2J%07%0d" + "%0a" * 3000
    conn = http.client.HTTPConnection(*address(guarded.url), timeout=10)
    conn.request("GET", path)
    assert conn.getresponse().status == 404
    conn.close()
    assert serve_process.wait_until(lambda: any("/forged" in line
                                                for line in guarded.lines[before:]))
    time.sleep(0.2)
    new = guarded.lines[before:]
    assert len([line for line in new if "GET" in line]) == 1, new
    line = next(line for line in new if "/forged" in line)
    assert "/forged\\nINFO:     GET /x 200 1.0 ms\\x1b[2J\\x07\\r\\n\\n" in line
    assert "\x1b" not in line and "\x07" not in line and len(line) < 1200


def test_head_of_the_live_page(guarded):
    conn = http.client.HTTPConnection(*address(guarded.url), timeout=10)
    conn.request("HEAD", "/")
    r = conn.getresponse()
    assert r.status == 200 and int(r.headers["content-length"]) > 0 and r.read() == b""
    conn.close()


def _healthy(url: str) -> bool:
    conn = http.client.HTTPConnection(*address(url), timeout=2)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def test_a_refused_request_keeps_its_connection(guarded):
    """A lone surrogate (a proxy's clients share its connection): 4xx, and the next request
    on that connection is answered."""
    conn = http.client.HTTPConnection(*address(guarded.url), timeout=30)
    for body in ('{"texts": ["I am \\ud800 cold."]}', '{"texts": ["x"], "run": "\\udc00"}'):
        conn.request("POST", "/v1/translate", body=body,
                     headers={"content-type": "application/json"})
        first = conn.getresponse()
        assert first.status == 422
        assert json.loads(first.read())["error"]["code"] == "invalid_request"
        sock = conn.sock
        conn.request("POST", "/v1/translate", body='{"texts": ["I am cold."]}',
                     headers={"content-type": "application/json"})
        second = conn.getresponse()
        assert second.status == 200 and json.loads(second.read())["translations"]
        assert conn.sock is sock        # the same connection, not a new one
    conn.close()


def test_a_repeated_message_is_written_once_per_interval_with_a_count(monkeypatch):
    from attnkit.server import limits

    clock = [100.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: clock[0])
    repeated = limits.Repeated(interval=10)

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("attnkit.server", logging.WARNING, __file__, 1, msg, (), None)
    written = []
    for _ in range(100):
        r = record("refused a connection: %d are open")
        if repeated.filter(r):
            written.append(r.msg)
        clock[0] += 0.25                # 100 in 25 s
    assert repeated.filter(record("another message"))
    assert len(written) == 3, written   # at 0 s, 10 s and 20 s
    assert written[0] == "refused a connection: %d are open"
    assert written[1].endswith("(and 39 more like it in 10 s)")


def test_a_log_record_is_one_escaped_line_traceback_included():
    """Issue #47 (5): client text reaches log lines beside the access log (an error's
    message, uvicorn's own lines, a traceback): the handlers' filter makes each one line."""
    from attnkit.server.limits import OneLine

    try:
        raise ValueError("bad path /x\nINFO:     forged\x1b[2J")
    except ValueError:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                                   "error answering %s", ("/x\r\nforged\u2028",),
                                   sys.exc_info())
    assert OneLine().filter(record)
    line = logging.Formatter("%(message)s").format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert line.startswith("error answering /x\\r\\nforged\\u2028\\nTraceback (most recent")
    assert "ValueError: bad path /x\\nINFO:     forged\\x1b[2J" in line


def test_the_access_log_writes_a_turn_of_the_event_loop_at_once():
    import asyncio
    import io

    from attnkit.server.limits import Lines

    class Stream(io.StringIO):
        writes = 0

        def write(self, text):
            self.writes += 1
            return super().write(text)
    stream = Stream()
    handler = Lines(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("attnkit.access", logging.INFO, __file__, 1, msg, (), None)

    async def answers() -> None:
        for i in range(5):
            handler.handle(record(f"line {i}"))
        assert stream.writes == 0            # held until this turn of the loop ends
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    asyncio.run(answers())
    handler.handle(record("no loop"))        # outside a loop: at once
    assert stream.getvalue().splitlines() == [f"line {i}" for i in range(5)] + ["no loop"]
    assert stream.writes == 2
