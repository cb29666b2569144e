"""Tiny runs of the three apps, trained once for the whole server suite, and a factory of
servers (an ASGI test client around `create_app`) over them."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest
import torch

from attnkit.apps import APPS

SERVED = ("translate", "sentiment", "caption")
TEST_HOSTS = ("testserver",)   # the Host of FastAPI's test client
# The tiny translator trained a little longer (~3 s more), so that it writes sentences of
# several tokens: a stream then has something to stream.
LONGER = {"translate": {"epochs": 8, "hidden": 32, "emb_dim": 16, "patience": 0}}
_spec = importlib.util.spec_from_file_location("serve_process",
                                               Path(__file__).with_name("serve_process.py"))
SERVE_PROCESS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SERVE_PROCESS)


@pytest.fixture(scope="session")
def serve_process():
    """The helpers of serve_process.py: ``ServeProcess(*args)`` runs ``attnkit serve``."""
    return SERVE_PROCESS


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> dict[str, tuple[Path, list]]:
    """app -> (its tiny run folder, a few inputs): trained once, 1 thread (~10 s)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = {}
    try:
        for name in SERVED:
            app = APPS[name]
            folder = tmp_path_factory.mktemp(f"serve-{name}")
            tiny = app.tiny(folder)
            app.train({**tiny.settings, **LONGER.get(name, {})}, folder / "run",
                      log=lambda _: None)
            runs[name] = (folder / "run", tiny.inputs)
    finally:
        torch.set_num_threads(before)
    return runs


@pytest.fixture(scope="session")
def loaded_runs(tiny_runs):
    """The three runs loaded once (named translate, sentiment, caption)."""
    pytest.importorskip("fastapi", reason="the serve extra is missing")
    from attnkit.server.options import RunSpec, ServeOptions
    from attnkit.server.state import load_runs

    specs = [RunSpec(name, path) for name, (path, _) in tiny_runs.items()]
    return load_runs(ServeOptions(runs=specs))


@pytest.fixture
def server(loaded_runs, one_thread):
    """``server(names=..., **options)``: a started test client of a server holding those runs
    (default all three) with those `ServeOptions` (by default answering the test client's
    host, ``testserver``)."""
    from fastapi.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.options import RunSpec, ServeOptions

    with contextlib.ExitStack() as stack:
        def make(names=SERVED, raise_server_exceptions=True, **options):
            runs = {n: loaded_runs[n] for n in names}
            specs = [RunSpec(n, r.loaded.path) for n, r in runs.items()]
            options.setdefault("allowed_hosts", TEST_HOSTS)
            app = create_app(ServeOptions(runs=specs, **options), runs)
            return stack.enter_context(TestClient(
                app, raise_server_exceptions=raise_server_exceptions))
        yield make
