"""The apps' models trained with a compiled step (`attnkit.training.compiling`): translate's
Transformer compiles to one graph, the 2018 IMDB model compiles (its fused pooling kernel
eager between graphs), and ``compile="auto"`` leaves the tiny runs eager.

Tiny runs of one epoch, their graphs built by the "aot_eager" backend (what dynamo captures and
AOTAutograd differentiates, without Inductor's code generation, which tests/training covers).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch._dynamo.utils import counters

from attnkit.apps import APPS
from attnkit.training import compiling

# The tiny translate run as a Transformer (as scripts/tiny_run_hashes.py trains it).
TRANSFORMER = {"arch": "transformer", "d_model": 16, "heads": 2, "layers": 1, "ff_dim": 32,
               "warmup": 10}


@pytest.fixture
def graphs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compiling, "BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def tiny_settings(name: str, folder) -> dict:
    settings = APPS[name].tiny(folder).settings
    if name == "translate":
        settings = {**{k: v for k, v in settings.items() if k not in ("hidden", "emb_dim")},
                    **TRANSFORMER}
    return settings


def runtime(run) -> dict:
    return json.loads((run.path / "config.json").read_text())["runtime"]


@pytest.mark.parametrize("name", ["translate", "sentiment"])
def test_the_model_trains_with_its_step_compiled(name, graphs_only, tmp_path, capsys):
    settings = {**tiny_settings(name, tmp_path), "epochs": 1, "compile": "on"}
    run = APPS[name].train(settings, tmp_path / "run", log=lambda _: None)
    assert run.stop_reason == "completed"
    assert runtime(run)["compile_resolved"] is True and "compile_error" not in runtime(run)
    assert "could not be compiled" not in capsys.readouterr().err
    if name == "translate":  # forward, loss and backward in one graph
        assert not counters["graph_break"], dict(counters["graph_break"])


def test_auto_leaves_a_short_run_eager(tmp_path):
    run = APPS["translate"].train({**tiny_settings("translate", tmp_path), "epochs": 1},
                                  tmp_path / "run", log=lambda _: None)
    assert runtime(run)["compile_resolved"] is False
