"""The server's own cost: CPU per request of ``attnkit serve`` against a bare FastAPI app.

Run: ``.venv/bin/python benchmarks/serve_overhead.py [RUN] --threads 2 [--requests N]
[--rounds N] [--concurrency C]``

Two servers, each a process of its own on loopback, under the same uvicorn settings (its HTTP
protocol, event loop, lifespan, no uvicorn access log):

* ``bare_fastapi``: FastAPI with one JSON POST route (``/v1/translate``: a pydantic body of
  texts, an answer of one object per text), served by plain uvicorn;
* ``attnkit``: ``attnkit serve --run RUN --threads N`` with its defaults (its guards, metrics
  and access log), ``RUN`` a translate run; by default a near-free model, the tiny Transformer
  of ``scripts/tiny_run_hashes.py`` (d_model 16, one layer), trained here in seconds.

The load generator is this process (`serve_load.Connection`: a minimal HTTP/1.1 client), at
``--concurrency`` keep-alive connections, one sentence of the run's test split a request.
Each server answers a warm-up first; then ``--rounds`` rounds, the two servers interleaved,
``--requests`` requests each. A round reads the server process's CPU time (user + system,
from ``/proc/PID/stat``) before and after, per request: ``cpu_ms`` of all its threads, and
``loop_cpu_ms`` of its event-loop thread alone (the main thread: the HTTP protocol, routing,
validation, batching, answers, log lines, metrics). The bare app has that thread only; the
rest of attnkit's, ``model_cpu_ms``, is the model thread and its OpenMP team running the
app's ``predict``: the tiny model decodes 19 greedy steps a sentence, not free. Medians of the
rounds. ``ratio``, the server's own cost, is attnkit's event-loop CPU per request over the
bare app's CPU per request; ``process_ratio`` the same with the model's. The last line is
JSON: ``{"bare_fastapi": {...}, "attnkit": {...}, "ratio": ..., "process_ratio": ...,
"machine": ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent / "src"))
sys.path.insert(0, str(BENCHMARKS))

import serve_load  # noqa: E402

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
BARE = '''
import sys, socket, uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str]

app = FastAPI()

@app.post("/v1/translate")
async def translate(body: Body) -> dict:
    return {"translations": [{"source": t, "text": t} for t in body.texts]}

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
sock.listen(2048)
print(f"attnkit: serving bare on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr,
      flush=True)
uvicorn.Server(uvicorn.Config(app, lifespan="on", access_log=False, log_level="warning",
                              server_header=False)).run(sockets=[sock])
'''


def cpu_ms(pid: int, thread: int | None = None) -> float:
    """The CPU milliseconds (user + system) of process ``pid``, or of its thread ``thread``."""
    where = f"/proc/{pid}/task/{thread}/stat" if thread else f"/proc/{pid}/stat"
    fields = Path(where).read_text(encoding="ascii").rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS   # utime, stime


def tiny_run(folder: Path) -> Path:
    """The near-free translate run: ``scripts/tiny_run_hashes.py``'s tiny Transformer."""
    sys.path.insert(0, str(BENCHMARKS.parent / "scripts"))
    import torch
    from tiny_run_hashes import TRANSFORMER

    from attnkit.apps import APPS

    torch.set_num_threads(1)
    app = APPS["translate"]
    tiny = app.tiny(folder)
    settings = {**{k: v for k, v in tiny.settings.items() if k not in ("hidden", "emb_dim")},
                **TRANSFORMER}
    return app.train(settings, folder / "run", log=lambda _: None).path


def measure(server: serve_load.Server, texts: list[str], concurrency: int) -> dict:
    """One round: ``texts`` sent at ``concurrency``; the server's CPU per request."""
    pid = server.proc.pid
    before, loop_before = cpu_ms(pid), cpu_ms(pid, pid)
    row = asyncio.run(serve_load.drive(server.url, texts, concurrency))
    answered = len(texts) - row["errors"]
    spent, loop = cpu_ms(pid) - before, cpu_ms(pid, pid) - loop_before
    return {"cpu_ms": spent / answered, "loop_cpu_ms": loop / answered,
            "model_cpu_ms": (spent - loop) / answered, "req_per_s": row["req_per_s"],
            "errors": row["errors"]}


def summary(rounds: list[dict]) -> dict:
    """The medians of the rounds, and the errors in all."""
    out = {k: round(statistics.median(r[k] for r in rounds), 4)
           for k in ("cpu_ms", "loop_cpu_ms", "model_cpu_ms", "req_per_s")}
    return {**out, "errors": sum(r["errors"] for r in rounds), "rounds": len(rounds)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", nargs="?", help="a translate run (default: the tiny Transformer, "
                   "trained here)")
    p.add_argument("--threads", type=int, default=2, help="attnkit's torch threads (default 2)")
    p.add_argument("--requests", type=int, default=2000, help="requests a round (default 2000)")
    p.add_argument("--rounds", type=int, default=5, help="rounds per server (default 5)")
    p.add_argument("--concurrency", type=int, default=32, help="connections (default 32)")
    args = p.parse_args(argv)
    from attnkit.machine import machine_line

    machine = machine_line()   # before the tiny model's training sets this process's threads
    print(f"machine: {machine}")
    print(f"command: {' '.join(sys.argv)}")
    with tempfile.TemporaryDirectory(prefix="attnkit-overhead-") as folder:
        run = args.run or str(tiny_run(Path(folder)))
        texts = serve_load.cycled(serve_load.test_sources(run), args.requests)
        servers = {"bare_fastapi": serve_load.Server([sys.executable, "-c", BARE]),
                   "attnkit": serve_load.Server(serve_load.server_command(run, args.threads,
                                                                          True))}
        rounds: dict[str, list[dict]] = {name: [] for name in servers}
        try:
            for server in servers.values():
                asyncio.run(serve_load.drive(server.url, texts[:200], args.concurrency))
            for r in range(args.rounds):
                for name, server in servers.items():
                    rounds[name].append(measure(server, texts, args.concurrency))
                    print(f"  round {r + 1} {name}: {rounds[name][-1]}", flush=True)
        finally:
            for server in servers.values():
                server.stop()
    result = {name: summary(rows) for name, rows in rounds.items()}
    bare, attnkit = result["bare_fastapi"], result["attnkit"]
    print(json.dumps({**result, "ratio": round(attnkit["loop_cpu_ms"] / bare["cpu_ms"], 3),
                      "process_ratio": round(attnkit["cpu_ms"] / bare["cpu_ms"], 3),
                      "concurrency": args.concurrency, "requests": args.requests,
                      "threads": args.threads, "machine": machine}))


if __name__ == "__main__":
    main()
