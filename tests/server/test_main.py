"""``attnkit serve`` as a process: start-up errors are one line, SIGTERM during 50 requests in
flight answers all of them and exits 0, SIGINT too, ``--workers 2`` serves and stops the same
way; ``attnkit serve --help`` needs no web stack."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading

import pytest

pytest.importorskip("fastapi", reason="the serve extra is missing")
pytest.importorskip("uvicorn", reason="the serve extra is missing")
pytest.importorskip("python_multipart", reason="the serve extra is missing")
httpx = pytest.importorskip("httpx", reason="httpx is missing")

pytestmark = pytest.mark.slow
LONG = "the cat does not see her and the dogs will not find them . " * 16


def run_cli(serve_process, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(serve_process.attnkit_command(*args), capture_output=True, text=True,
                          env=serve_process.env(), timeout=timeout)


def one_error_line(capsys, *args: str) -> str:
    """``attnkit serve ARGS`` in this process: exit status 2 and one line on stderr."""
    from attnkit.cli.main import main

    assert main(["serve", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnkit: error: "), lines
    return lines[0]


def test_a_run_that_cannot_load_stops_start_up_with_one_line(tiny_runs, tmp_path, capsys,
                                                             one_thread):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"app": "translate", "format": 2}', encoding="utf-8")
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "config.json").write_text('{"app": "nope"}', encoding="utf-8")
    good = str(tiny_runs["sentiment"][0])
    assert "no such run folder" in one_error_line(capsys, "--run", str(tmp_path / "missing"))
    assert "config.json" in one_error_line(capsys, "--run", good, "--run", str(broken))
    assert "'nope'" in one_error_line(capsys, "--run", str(tmp_path / "plugin"))
    assert "--api-keys" in one_error_line(capsys, "--run", good, "--host", "0.0.0.0")
    assert "--max-batch" in one_error_line(capsys, "--run", good, "--max-batch", "0")
    assert "named 'x'" in one_error_line(capsys, "--run", f"x={good}", "--run", f"x={good}")
    keys = tmp_path / "keys.txt"
    keys.write_text("# ops\nshort\n", encoding="utf-8")
    assert "key 1" in one_error_line(capsys, "--run", good, "--api-keys", str(keys))
    assert "/dev/zero" in one_error_line(capsys, "--run", good, "--api-keys", "/dev/zero")


def test_a_busy_port_is_one_line(tiny_runs, capsys, one_thread):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        line = one_error_line(capsys, "--run", str(tiny_runs["sentiment"][0]), "--port", port)
    assert f"cannot listen on 127.0.0.1:{port}" in line


def test_serve_help_imports_no_web_stack(serve_process):
    code = ("import sys; from attnkit.cli.main import build_parser; "
            "build_parser(['serve']).parse_args(['serve', '--run', 'x']); "
            "print(sorted(m for m in ('fastapi', 'uvicorn', 'prometheus_client', 'starlette') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=serve_process.env(), timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def _depth(metrics: str) -> tuple[float, float]:
    """(requests waiting or running, requests answered 200) of the translate run."""
    depth = re.search(r'attnkit_queue_depth\{run="translate"\} (\S+)', metrics)
    done = re.search(r'attnkit_requests_total\{method="POST",route="/v1/translate",'
                     r'status="200"\} (\S+)', metrics)
    return (float(depth.group(1)) if depth else 0.0, float(done.group(1)) if done else 0.0)


def test_sigterm_during_50_requests_answers_all_and_exits_0(serve_process, tiny_runs):
    run = str(tiny_runs["translate"][0])
    # Batches gather for up to 3 s (and 1,000 texts): all 50 requests are in flight at once,
    # most of them waiting, when the signal comes.
    with serve_process.ServeProcess("--run", f"translate={run}", "--threads", "1",
                                    "--max-batch", "1000",
                                    "--max-wait-ms", "3000") as srv:
        results: list = []

        async def load() -> None:
            limits = httpx.Limits(max_connections=60)
            async with httpx.AsyncClient(base_url=srv.url, timeout=120, limits=limits) as c:
                body = {"texts": [LONG] * 8}
                results.extend(await asyncio.gather(
                    *(c.post("/v1/translate", json=body) for _ in range(50)),
                    return_exceptions=True))
        client = threading.Thread(target=lambda: asyncio.run(load()))
        client.start()
        seen = {}

        def all_received() -> bool:
            depth, answered = _depth(httpx.get(srv.url + "/metrics").text)
            seen.update(depth=depth, answered=answered)
            return depth + answered >= 50
        assert serve_process.wait_until(all_received, timeout=60), seen
        srv.send(signal.SIGTERM)
        # It stops accepting at once, while the requests in flight go on.
        assert serve_process.wait_until(lambda: _refused(srv.url), timeout=10)
        assert srv.wait(60) == 0, "\n".join(srv.lines)
        client.join(60)
    assert seen["depth"] >= 10, seen            # most were still in flight at the signal
    assert len(results) == 50
    assert all(not isinstance(r, Exception) and r.status_code == 200 for r in results), [
        r if isinstance(r, Exception) else r.status_code for r in results]
    assert all(len(r.json()["translations"]) == 8 for r in results)
    assert any("Shutting down" in line for line in srv.lines)   # uvicorn's own drain


def _refused(url: str) -> bool:
    """Whether a new connection is refused; one taken from the backlog just as the listening
    socket closes is reset instead, and the next try tells."""
    try:
        httpx.get(url + "/healthz", timeout=2)
    except httpx.ConnectError:
        return True
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return False
    return False


def test_sigint_when_idle_exits_0(serve_process, tiny_runs):
    with serve_process.ServeProcess("--run", str(tiny_runs["sentiment"][0])) as srv:
        assert httpx.get(srv.url + "/readyz").json() == {"status": "ready"}
        for _ in range(3):   # the access log: a line each, none left out as a repeat
            httpx.get(srv.url + "/healthz")
        srv.send(signal.SIGINT)
        assert srv.wait(30) == 0
    assert sum(" GET /healthz 200 " in line for line in srv.lines) == 3, srv.lines


def test_two_workers_serve_count_together_and_stop_on_sigterm(serve_process, tiny_runs):
    run = str(tiny_runs["sentiment"][0])
    with serve_process.ServeProcess("--run", run, "--workers", "2", "--threads", "1") as srv:
        for _ in range(6):
            r = httpx.post(srv.url + "/v1/sentiment", json={"texts": ["a superb film"]})
            assert r.status_code == 200
        metrics = httpx.get(srv.url + "/metrics").text
        count = re.search(r'attnkit_requests_total\{method="POST",route="/v1/sentiment",'
                          r'status="200"\} (\S+)', metrics)
        assert count and float(count.group(1)) == 6.0, metrics   # both workers' requests
        srv.send(signal.SIGTERM)
        assert srv.wait(60) == 0, "\n".join(srv.lines)


def test_a_worker_that_cannot_load_stops_the_start(serve_process, tmp_path):
    done = run_cli(serve_process, "serve", "--run", str(tmp_path / "missing"), "--workers", "2",
                   "--port", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"attnkit: error: {tmp_path / 'missing'}: no such run folder"]


def test_the_listening_socket_says_it_is_tcp(tiny_runs):
    """asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP; without it a
    keep-alive client waits ~40 ms for each answer (Nagle against delayed ACKs)."""
    from attnkit.server.main import listen
    from attnkit.server.options import ServeOptions, parse_run

    sock = listen(ServeOptions(runs=[parse_run(str(tiny_runs["sentiment"][0]))], port=0))
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_serve_lets_openmp_workers_spin_briefly_then_sleep(monkeypatch, tmp_path, capsys):
    """Set before torch loads OpenMP; a policy or a spin count the user set is kept, and
    nothing is added to it."""
    from attnkit.cli.main import main

    missing = str(tmp_path / "missing")
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    assert main(["serve", "--run", missing]) == 2
    assert (os.environ["OMP_WAIT_POLICY"], os.environ["GOMP_SPINCOUNT"]) == ("ACTIVE", "10000")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.delenv("GOMP_SPINCOUNT")
    assert main(["serve", "--run", missing]) == 2
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "0")
    assert main(["serve", "--run", missing]) == 2
    assert os.environ["GOMP_SPINCOUNT"] == "0" and "OMP_WAIT_POLICY" not in os.environ
    # Other commands leave OpenMP alone.
    monkeypatch.delenv("GOMP_SPINCOUNT")
    assert main(["translate", "predict", "--run", missing]) == 2
    assert not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ)


def test_the_open_file_limit_fits_the_connection_cap(monkeypatch):
    """A cap the process could not reach would let accepts fail before it refuses anything."""
    import resource

    from attnkit.errors import UsageError
    from attnkit.server.main import fit_open_files

    limits = {"now": (1024, 4096)}
    monkeypatch.setattr(resource, "getrlimit", lambda kind: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda kind, value: limits.update(now=value))
    fit_open_files(1000)
    assert limits["now"] == (1128, 4096)
    with pytest.raises(UsageError, match="--max-connections 5000"):
        fit_open_files(5000)


def test_a_missing_serve_extra_names_every_missing_package(monkeypatch):
    """One install fixes the lot, so the message names all that is missing."""
    import importlib.util

    from attnkit.errors import UsageError
    from attnkit.server.main import require_web_stack

    real = importlib.util.find_spec
    gone = {"uvicorn", "python_multipart"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in gone else real(name, *a))
    with pytest.raises(UsageError, match=r"needs uvicorn, python-multipart: pip install"):
        require_web_stack()
