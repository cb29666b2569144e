"""The serving benchmark's parts: percentiles, rows, the last line, the HTTP bytes it writes
and reads, the server command, the memory of a process tree, and its interleaved blocks
against a stub server (no attnkit server, no speed bars)."""

import contextlib
import importlib.util
import json
import math
import os
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_load.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("serve_load", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_percentiles_interpolate_between_ranks(bench):
    values = [0.4, 0.1, 0.3, 0.2]
    assert bench.percentile(values, 0) == 0.1 and bench.percentile(values, 100) == 0.4
    assert bench.percentile(values, 50) == pytest.approx(0.25)
    assert bench.percentile([7.0], 99) == 7.0
    assert math.isnan(bench.percentile([], 50))


def test_a_row_counts_errors_as_requests_and_reports_milliseconds(bench):
    row = bench.summarize([0.010, 0.020, 0.030], wall=2.0, errors=1, sentences=6)
    assert row["req_per_s"] == 2.0 and row["sent_per_s"] == 3.0 and row["errors"] == 1
    assert row["p50_ms"] == 20.0 and row["p95_ms"] == 29.0 and row["p99_ms"] == 29.8


def test_texts_cycle_and_bodies_split_them(bench):
    assert bench.cycled(["a", "b"], 5) == ["a", "b", "a", "b", "a"]
    with pytest.raises(ValueError):
        bench.cycled([], 3)
    bodies = bench.request_bodies(["a", "b", "c"], 2)
    assert [json.loads(b) for b in bodies] == [{"texts": ["a", "b"]}, {"texts": ["c"]}]


def test_http_bytes_out_and_in(bench):
    raw = bench.request_bytes("127.0.0.1", "/v1/translate", b'{"texts": ["x"]}')
    head, body = raw.split(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert b"Content-Length: 16" in head and body == b'{"texts": ["x"]}'
    assert bench.parse_head(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 12\r\n"
                            b"retry-after: 1\r\n\r\n") == (429, 12)
    for bad in (b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"):
        with pytest.raises(ValueError):
            bench.parse_head(bad)


def test_server_command_and_memory_and_the_last_line(bench):
    on = bench.server_command("runs/fr", 2, True)
    off = bench.server_command("runs/fr", 2, False)
    assert on[-6:] == ["--run", "bench=runs/fr", "--threads", "2", "--port", "0"]
    assert off[-2:] == ["--max-batch", "1"]
    # Two workers share the threads: one each.
    two = bench.server_command("runs/fr", 2, True, workers=2)
    assert two[-6:] == ["--threads", "1", "--port", "0", "--workers", "2"]
    assert bench.rss_mb(os.getpid()) > 1 and bench.rss_mb(2 ** 22 + 7) is None
    rows = [{"concurrency": c, "batching": True, "sent_per_s": 8.0, "p50_ms": 1.0,
             "p99_ms": 2.0, "errors": 0} for c in (1, 32, 128)]
    by_batch = {"1": 4.0, "32": 10.0, "all": 16.0}
    one = {"in_process_ms": 20.0, "served_ms": 22.5, "gap_ms": 2.5, "rounds": 6}
    of_32 = {"in_process_sent_per_s": 300.0, "served_sent_per_s": 270.0, "ratio": 0.9,
             "spread": 1.1, "size": 32, "rounds": 6}
    last = json.loads(bench.result_json(by_batch, 25.0, one, of_32, 100.0, 101.5, rows))
    assert last["in_process_sent_per_s"] == 16.0 and last["in_process_by_batch"] == by_batch
    assert last["one_sentence"] == one and last["batch_32"] == of_32
    assert last["in_process_one_call_ms"] == 25.0
    assert last["rss_before_mb"] == 100.0 and last["rss_after_mb"] == 101.5
    # Each row against the in-process calls of as many sentences as its clients hold.
    assert [r["vs_in_process"] for r in last["rows"]] == [2.0, 0.8, 0.5]


@contextlib.contextmanager
def stub_server(seen: list):
    """A local HTTP server answering every POST with one translation; records its texts."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(("served", json.loads(body)["texts"][0]))
            reply = b'{"translations": [{}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def test_one_sentence_interleaved_alternates_blocks_and_reports_medians(bench):
    """Blocks of in-process calls and of requests alternate (each round on the next texts);
    the medians and their gap come from the times measured."""
    seen: list[tuple[str, str]] = []

    def local(batch):
        seen.append(("local", batch[0]))
        return 0.01
    texts = [f"t{i}" for i in range(7)]
    with stub_server(seen) as url:
        one = bench.one_sentence_interleaved(url, texts, 2, local, per_round=3)
    assert [kind for kind, _ in seen] == ["local"] * 3 + ["served"] * 3 + ["local"] * 3 + \
        ["served"] * 3
    assert [t for _, t in seen][:6] == ["t0", "t1", "t2"] * 2
    assert [t for _, t in seen][6:9] == ["t3", "t4", "t5"]
    assert one["in_process_ms"] == 10.0 and one["rounds"] == 2
    assert one["served_ms"] > 0 and one["gap_ms"] == round(one["served_ms"] - 10.0, 2)


def test_batch_interleaved_alternates_calls_of_size_with_as_many_clients(bench):
    """Each round times its block in calls of ``size`` sentences, then sends the same block as
    one-sentence requests; the ratio is served over in-process, median over the rounds."""
    seen: list[tuple[str, list]] = []
    calls: list[list[str]] = []

    def local(batch):
        calls.append(batch)
        seen.append(("local", batch))
        return 1.0   # 2 sentences a second: far slower than the stub server
    texts = [f"t{i}" for i in range(9)]
    with stub_server(seen) as url:
        of_2 = bench.batch_interleaved(url, texts, 2, local, size=2, per_round=4)
    assert calls == [["t0", "t1"], ["t2", "t3"], ["t4", "t5"], ["t6", "t7"]]
    assert [kind for kind, _ in seen] == ["local"] * 2 + ["served"] * 4 + ["local"] * 2 + \
        ["served"] * 4
    assert sorted(t for kind, t in seen[2:6]) == ["t0", "t1", "t2", "t3"]
    assert of_2["in_process_sent_per_s"] == 2.0
    assert of_2["served_sent_per_s"] > 10
    # Two rounds: each median is a mean, so the ratio is the served rate over 2 sentences/s.
    assert of_2["ratio"] == pytest.approx(of_2["served_sent_per_s"] / 2.0, abs=0.06)
    assert of_2["size"] == 2 and of_2["rounds"] == 2 and of_2["spread"] >= 1


def test_memory_counts_the_workers_of_a_server(bench):
    """A server with workers holds its models in child processes: they are counted."""
    import subprocess
    import sys
    import time

    alone = bench.rss_mb(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for _ in range(100):   # until the child's interpreter is up
            own = bench.rss_mb(child.pid)
            if own and own > 5:
                break
            time.sleep(0.05)
        assert own and own > 5
        assert bench.rss_mb(os.getpid()) >= alone + own - 2   # the parent's own may move a bit
    finally:
        child.kill()
        child.wait()
