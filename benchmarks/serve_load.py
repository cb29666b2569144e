"""Serving throughput: ``attnkit serve`` under load, against the same texts in-process.

Run: ``.venv/bin/python benchmarks/serve_load.py RUN [--threads 2] [--requests N]``

``RUN`` is a translate run folder. The texts are its test split's English sentences (cycled
when ``--requests`` asks for more), one sentence per request (``--texts-per-request K``: K),
with the API's defaults (greedy, ``<unk>`` replacement, no attention in the answer). In this
one run:

* **in-process**: ``predict`` of the same texts in this process, with ``--threads`` torch
  threads, in calls of 1 sentence, of 32 and of all of them (attnkit's own batching:
  length-sorted batches of 8,192 tokens): the ceilings a server is compared with (a server
  holding ``c`` requests of one sentence decodes at most ``c`` sentences a call). The run is
  loaded as the server loads it, from the same ``attnkit serve`` options (``--serve-option``
  passes more to both): the same engine and decoding path, whichever the server serves with;
* **served**: ``attnkit serve --threads N`` started on loopback (with ``--workers W``:
  ``--workers W --threads N/W``, the cores shared among its processes; a separate process: its
  memory is its own), driven by an asynchronous HTTP client at concurrency 1, 8, 32 and 128 (one
  keep-alive connection per request in flight; a minimal HTTP/1.1 client on asyncio streams,
  `Connection`, so that the load generator takes little of the CPU it shares with the server),
  ``--requests`` requests per row; batching on (the server's defaults: up to 64 sentences,
  no fixed wait), then off (a second server with ``--max-batch 1``). Each server first answers a
  few requests as warm-up.
* **one sentence, interleaved**: on this noisy kind of host a call's time drifts by a third
  within minutes, so the one-sentence latency is also compared block by block: ``--rounds``
  rounds of 50 one-sentence ``predict`` calls in this process, then 50 one-sentence requests
  to the batching server at concurrency 1, each round on the next 50 texts; the medians of
  both and their difference (``one_sentence``). The same for 32 sentences (``batch_32``):
  ``--rounds`` rounds of 960 sentences in in-process calls of 32, then the same 960 as
  requests at concurrency 32: the medians of both, and the median of the rounds' ratios with
  its spread. A row reports requests/s, sentences/s, the p50, p95 and p99 latency, and errors
  (any answer but 200, or no answer).

The server's resident memory (``VmRSS``) is read after the batching server's warm-up and after
its last row. The client runs in this process, on the same CPU as the server: on a 2-core
machine it takes a share of the cores the server's ``--threads`` would use (the figures are a
whole machine's: server and clients together).

The last line is JSON: ``{"in_process_sent_per_s", "in_process_by_batch": {"1", "32", "all"},
"in_process_one_call_ms", "one_sentence": {"in_process_ms", "served_ms", "gap_ms",
"rounds"}, "batch_32": {"in_process_sent_per_s", "served_sent_per_s", "ratio", "spread",
"size", "rounds"}, "rss_before_mb", "rss_after_mb", "rows": [{"concurrency",
"batching", "sent_per_s", "req_per_s", "p50_ms", "p95_ms", "p99_ms", "errors",
"vs_in_process"}, ...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

CONCURRENCY = (1, 8, 32, 128)
WARMUP = 32
IN_PROCESS_BATCHES = ("1", "32", "all")   # sentences per in-process call
SERVING = re.compile(r"attnkit: serving .*?on (http://\S+)")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, interpolated between ranks (NaN for
    none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def summarize(latencies: Sequence[float], wall: float, errors: int, sentences: int) -> dict:
    """One row's figures from its answered requests' latencies (seconds), its wall time, its
    errors and the sentences it translated."""
    requests = len(latencies) + errors
    return {"req_per_s": round(requests / wall, 1) if wall > 0 else None,
            "sent_per_s": round(sentences / wall, 1) if wall > 0 else None,
            "p50_ms": round(percentile(latencies, 50) * 1000, 1),
            "p95_ms": round(percentile(latencies, 95) * 1000, 1),
            "p99_ms": round(percentile(latencies, 99) * 1000, 1),
            "errors": errors}


def cycled(texts: Sequence[str], n: int) -> list[str]:
    """``n`` texts, ``texts`` repeated as often as needed."""
    if not texts:
        raise ValueError("no texts to send")
    return [texts[i % len(texts)] for i in range(n)]


def rss_mb(pid: int) -> float | None:
    """The resident memory of process ``pid`` and its descendants (a server's workers) in MB
    (None where /proc has no answer for ``pid``)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, flags=re.M)
    if match is None:
        return None
    total = int(match.group(1)) / 1024
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            total += sum(rss_mb(int(child)) or 0.0 for child in task.read_text().split())
    return round(total, 1)


def serve_arguments(run: str, threads: int, batching: bool = True, workers: int = 1,
                    more: Sequence[str] = ()) -> list[str]:
    """The arguments of ``attnkit serve`` of ``run`` (named ``bench``) on a free loopback
    port, batching on or off; with ``workers`` processes, the ``threads`` shared among them;
    ``more``: any other option (``--engine ctranslate2``...)."""
    arguments = ["--run", f"bench={run}", "--threads", str(max(1, threads // workers)),
                 "--port", "0", *more]
    if workers > 1:
        arguments += ["--workers", str(workers)]
    return arguments + ([] if batching else ["--max-batch", "1"])


def server_command(run: str, threads: int, batching: bool, workers: int = 1,
                   more: Sequence[str] = ()) -> list[str]:
    """``attnkit serve`` with `serve_arguments`, as a command."""
    return [sys.executable, "-m", "attnkit.cli.main", "serve",
            *serve_arguments(run, threads, batching, workers, more)]


def result_json(by_batch: dict[str, float], one_call_ms: float,
                one_sentence: dict[str, float] | None, batch_32: dict[str, float] | None,
                rss_before: float | None,
                rss_after: float | None, rows: list[dict[str, Any]]) -> str:
    """The last line: the figures the issue's bars read. Each row's ``vs_in_process`` is its
    sentences/s over the in-process calls of as many sentences as its concurrency holds
    (``"1"`` at concurrency 1, ``"32"`` at 32, ``"all"`` otherwise)."""
    for r in rows:
        key = {1: "1", 32: "32"}.get(r["concurrency"], "all")
        r["vs_in_process"] = round(r["sent_per_s"] / by_batch[key], 3) if by_batch.get(key) \
            else None
    return json.dumps({"in_process_sent_per_s": by_batch.get("all"),
                       "in_process_by_batch": by_batch, "in_process_one_call_ms": one_call_ms,
                       "one_sentence": one_sentence, "batch_32": batch_32,
                       "rss_before_mb": rss_before,
                       "rss_after_mb": rss_after, "rows": rows})


class Server:
    """``attnkit serve`` in a child process; ``url`` once it listens."""

    def __init__(self, command: list[str]):
        env = {**os.environ, "PYTHONPATH": str(SRC), "NO_PROXY": "127.0.0.1,localhost"}
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.url: str | None = None
        self.log: list[str] = []
        found = threading.Event()

        def read() -> None:
            for line in self.proc.stderr:
                self.log.append(line.rstrip())
                match = SERVING.search(line)
                if match:
                    self.url = match.group(1)
                    found.set()
            found.set()
        threading.Thread(target=read, daemon=True).start()
        found.wait(300)
        if self.url is None:
            self.stop()
            raise SystemExit("the server did not start:\n" + "\n".join(self.log))

    def wait_for_decoding(self, path: str | None, seconds: float = 300.0) -> None:
        """Wait until ``/v1/models`` says the run decodes by ``path`` (``"compiled"``: its
        background build is done), as the in-process reference does."""
        import urllib.request

        deadline = time.monotonic() + seconds
        while path is not None:
            with urllib.request.urlopen(f"{self.url}/v1/models", timeout=10) as r:  # noqa: S310
                if json.load(r)["models"][0].get("decoding") == path:
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not switch to {path} decoding in {seconds} s")
            time.sleep(0.5)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(120)


def request_bytes(host: str, path: str, body: bytes) -> bytes:
    """One HTTP/1.1 POST of a JSON body, on a keep-alive connection."""
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("ascii") + body


def parse_head(head: bytes) -> tuple[int, int]:
    """The status and the Content-Length of a response head (``...\r\n\r\n``).

    Raises:
        ValueError: not an HTTP/1.1 response with a Content-Length.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP response: {lines[0]!r}")
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(parts[1]), int(value.strip())
    raise ValueError("a response without Content-Length")


class Connection:
    """One keep-alive connection of a minimal HTTP/1.1 client: the few lines the benchmark
    needs. The load generator shares the server's CPU, so it should take as little of it as it
    can; a general client (httpx) spends several times the server's own time per request at
    concurrency 32, which would measure the client more than the server."""

    def __init__(self, url: str):
        host_port = url.split("://", 1)[1].rstrip("/")
        self.host, _, port = host_port.rpartition(":")
        self.port, self.streams = int(port), None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        try:
            writer.write(request_bytes(self.host, path, body))
            status, length = parse_head(await reader.readuntil(b"\r\n\r\n"))
            return status, await reader.readexactly(length)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.close()
            raise

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


def request_bodies(texts: Sequence[str], per_request: int) -> list[bytes]:
    """The JSON bodies of ``/v1/translate`` requests of ``per_request`` texts each (the last
    one may hold fewer)."""
    return [json.dumps({"texts": list(texts[i:i + per_request])}).encode()
            for i in range(0, len(texts), per_request)]


async def drive(url: str, texts: Sequence[str], concurrency: int,
                per_request: int = 1) -> dict[str, Any]:
    """POST ``texts`` to ``/v1/translate``, ``per_request`` a request, with ``concurrency``
    requests in flight (one keep-alive connection each)."""
    bodies = request_bodies(texts, per_request)
    sent = [len(texts[i:i + per_request]) for i in range(0, len(texts), per_request)]
    latencies: list[float] = []
    errors, sentences = 0, 0
    order = iter(range(len(bodies)))

    async def client() -> None:
        nonlocal errors, sentences
        conn = Connection(url)
        try:
            for i in order:
                start = time.perf_counter()
                try:
                    status, data = await conn.post("/v1/translate", bodies[i])
                    answered = len(json.loads(data)["translations"]) if status == 200 else 0
                    ok = answered == sent[i]   # counted once: the client shares the CPU
                except (OSError, ValueError, KeyError, asyncio.IncompleteReadError,
                        asyncio.LimitOverrunError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - start)
                    sentences += answered
                else:
                    errors += 1
        finally:
            conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    return summarize(latencies, wall, errors, sentences)


def served_in_process(arguments: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """The run as ``attnkit serve ARGUMENTS`` loads it, here (its engine and every option
    the same, whatever they are), and the options ``/v1/translate`` gives its ``predict`` for a
    request of the API's defaults (greedy, ``<unk>`` replacement, no attention)."""
    from attnkit.cli.main import build_parser
    from attnkit.cli.serve import serve_options
    from attnkit.server import app
    from attnkit.server.state import load_runs

    options = serve_options(build_parser(["serve"]).parse_args(["serve", *arguments]))
    run = load_runs(options)["bench"]
    # The engine the server ends up serving with: compiled once its background build is
    # done (`Server.wait_for_decoding` waits for the same there).
    run.compile("off" if options.compile == "off" else "on")
    body = app.TranslateRequest(texts=["x"])
    return run, {"beam": body.beam, "alpha": body.alpha, **app.attention_options(run, body)}


def in_process(arguments: Sequence[str], texts: Sequence[str], threads: int
               ) -> tuple[dict[str, float], float, Any]:
    """The served run's ``predict`` (`served_in_process`) of ``texts`` in this process
    (after a warm-up), in calls of 1, 32 and all the sentences: (sentences/s by sentences per
    call, the median milliseconds of a one-sentence call, and a function that times one more
    call)."""
    import torch

    torch.set_num_threads(threads)
    run, options = served_in_process(arguments)
    run.app.predict(run.loaded, list(texts[:WARMUP]), **options)
    by_batch, one_call = {}, []
    for batch in IN_PROCESS_BATCHES:
        size = len(texts) if batch == "all" else int(batch)
        start = time.perf_counter()
        for at in range(0, len(texts), size):
            call = time.perf_counter()
            run.app.predict(run.loaded, list(texts[at:at + size]), **options)
            if batch == "1":
                one_call.append(time.perf_counter() - call)
        by_batch[batch] = round(len(texts) / (time.perf_counter() - start), 1)

    def call_seconds(batch: list[str]) -> float:
        start = time.perf_counter()
        run.app.predict(run.loaded, batch, **options)
        return time.perf_counter() - start
    call_seconds.decoding = run.info()["decoding"]   # type: ignore[attr-defined]
    return by_batch, round(1000 * statistics.median(one_call), 2), call_seconds


def one_sentence_interleaved(url: str, texts: Sequence[str], rounds: int,
                             call_seconds: Any, per_round: int = 50) -> dict[str, float]:
    """Rounds of ``per_round`` one-sentence calls in this process, then as many requests to the
    server at concurrency 1 (the next texts each round): the median milliseconds of each."""
    local: list[float] = []
    served: list[float] = []

    async def requests(block: Sequence[str]) -> None:
        conn = Connection(url)
        try:
            for body in request_bodies(block, 1):
                start = time.perf_counter()
                status, _ = await conn.post("/v1/translate", body)
                if status == 200:
                    served.append(1000 * (time.perf_counter() - start))
        finally:
            conn.close()

    for r in range(rounds):
        block = cycled(texts[r * per_round:], per_round)
        local.extend(1000 * call_seconds([t]) for t in block)
        asyncio.run(requests(block))
    here, there = statistics.median(local), statistics.median(served)
    return {"in_process_ms": round(here, 2), "served_ms": round(there, 2),
            "gap_ms": round(there - here, 2), "rounds": rounds}


def batch_interleaved(url: str, texts: Sequence[str], rounds: int, call_seconds: Any,
                      size: int = 32, per_round: int = 960) -> dict[str, float]:
    """Rounds of ``per_round`` sentences in in-process calls of ``size``, then the same
    sentences as one-sentence requests at concurrency ``size`` (the next texts each round):
    the median sentences/s of each and the median of the rounds' ratios, with their spread
    (largest ratio over smallest)."""
    local, served, ratios = [], [], []
    for r in range(rounds):
        block = cycled(texts[r * per_round % len(texts):], per_round)
        seconds = sum(call_seconds(list(block[at:at + size]))
                      for at in range(0, per_round, size))
        local.append(per_round / seconds)
        served.append(asyncio.run(drive(url, block, size))["sent_per_s"])
        ratios.append(served[-1] / local[-1])
    return {"in_process_sent_per_s": round(statistics.median(local), 1),
            "served_sent_per_s": round(statistics.median(served), 1),
            "ratio": round(statistics.median(ratios), 3),
            "spread": round(max(ratios) / min(ratios), 2), "size": size, "rounds": rounds}


def test_sources(run: str) -> list[str]:
    """The English side of the run's test split."""
    from attnkit.apps.run_files import read_config
    from attnkit.data.translation_splits import eval_pairs

    return [en for en, _ in eval_pairs(None, read_config(run, "translate")["data"])]


def print_table(rows: list[dict[str, Any]], base: float) -> None:
    print(f"{'concurrency':>11}{'batching':>9}{'req/s':>9}{'sent/s':>9}{'vs in-proc':>11}"
          f"{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for r in rows:
        ratio = r["sent_per_s"] / base if base and r["sent_per_s"] else math.nan
        print(f"{r['concurrency']:>11}{'on' if r['batching'] else 'off':>9}{r['req_per_s']:>9}"
              f"{r['sent_per_s']:>9}{ratio:>10.0%} {r['p50_ms']:>8}{r['p95_ms']:>9}"
              f"{r['p99_ms']:>9}{r['errors']:>8}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", help="a translate run folder")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--requests", type=int, default=2000, help="requests per row (default 2000)")
    p.add_argument("--texts-per-request", type=int, default=1, metavar="K",
                   help="sentences in each request (default 1)")
    p.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)),
                   help="comma-separated (default 1,8,32,128)")
    p.add_argument("--workers", type=int, default=1,
                   help="server processes, the --threads shared among them (default 1)")
    p.add_argument("--rounds", type=int, default=6,
                   help="rounds of the interleaved one-sentence comparison (default 6)")
    p.add_argument("--serve-option", action="append", default=[], metavar="OPTION",
                   help="an option for attnkit serve, given to the in-process reference too "
                   "(e.g. --serve-option=--engine=ctranslate2); repeat for more")
    args = p.parse_args(argv)
    from attnkit.machine import machine_line

    concurrency = [int(c) for c in args.concurrency.split(",")]
    texts = cycled(test_sources(args.run), args.requests * args.texts_per_request)
    print(f"machine: {machine_line()}")
    print(f"command: {' '.join(sys.argv)}  ({args.requests} requests of "
          f"{args.texts_per_request} sentence(s) a row)")
    by_batch, one_ms, call_seconds = in_process(
        serve_arguments(args.run, args.threads, more=args.serve_option), texts, args.threads)
    base = by_batch["all"]
    print(f"in-process: {by_batch} sentences/s by sentences per call; a one-sentence call "
          f"{one_ms} ms (median)")
    rows, rss, one, of_32 = [], {}, None, None
    for batching in (True, False):
        server = Server(server_command(args.run, args.threads, batching, args.workers,
                                       args.serve_option))
        try:
            server.wait_for_decoding(call_seconds.decoding)
            asyncio.run(drive(server.url, texts[:WARMUP], 8))
            if batching:
                rss["before"] = rss_mb(server.proc.pid)
                one = one_sentence_interleaved(server.url, texts, args.rounds, call_seconds)
                print(f"  one sentence, interleaved: in-process {one['in_process_ms']} ms, "
                      f"served {one['served_ms']} ms (median of {args.rounds} rounds)",
                      flush=True)
                of_32 = batch_interleaved(server.url, texts, args.rounds, call_seconds)
                print(f"  32 sentences, interleaved: in-process "
                      f"{of_32['in_process_sent_per_s']} sentences/s, served at concurrency 32 "
                      f"{of_32['served_sent_per_s']}, ratio {of_32['ratio']} (median of "
                      f"{args.rounds} rounds, spread {of_32['spread']})", flush=True)
            for c in concurrency:
                row = {"concurrency": c, "batching": batching,
                       **asyncio.run(drive(server.url, texts, c, args.texts_per_request))}
                rows.append(row)
                print(f"  concurrency {c:>3}, batching {'on ' if batching else 'off'}: "
                      f"{row['sent_per_s']} sentences/s, {row['errors']} errors", flush=True)
            if batching:
                rss["after"] = rss_mb(server.proc.pid)
        finally:
            status = server.stop()
        if status != 0:
            print(f"note: the server exited {status}:\n" + "\n".join(server.log[-5:]))
    print_table(rows, base)
    print(f"server memory (batching on): {rss.get('before')} MB after warm-up, "
          f"{rss.get('after')} MB after its rows")
    print(result_json(by_batch, one_ms, one, of_32, rss.get("before"), rss.get("after"), rows))


if __name__ == "__main__":
    main()
