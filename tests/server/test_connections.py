"""What a client can hold of a real ``attnkit serve`` process: connections that never finish
their headers are closed after ``--header-timeout``, beyond ``--max-connections`` a new one is
answered 503 at once (the accept loop never stalls), the log says a repeated warning once per
interval with a count, and a request the server refuses (a lone surrogate) leaves its
keep-alive connection open for the next request."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is missing")
pytest.importorskip("uvicorn", reason="the serve extra is missing")

pytestmark = pytest.mark.slow
PARTIAL = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def guarded(serve_process, tiny_runs):
    """A server that allows 8 connections and 1 s to send a request's headers."""
    with serve_process.ServeProcess("--run", f"translate={tiny_runs['translate'][0]}",
                                    "--threads", "1", "--max-connections", "8",
                                    "--header-timeout", "1") as srv:
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
