"""What the apps share beside their settings (`attnkit.apps.options`) and the registry of
apps."""

import sys

import pytest
import torch

from attnkit.apps.options import build_bounded, checked_sizes, resolve_device
from attnkit.apps.registry import AppRegistry
from attnkit.errors import CheckpointError, UsageError


def test_devices():
    assert resolve_device(None) == "cpu" and resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda:0")
    with pytest.raises(UsageError, match="unknown device"):
        resolve_device("bogus")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="--device cuda:7"):
            resolve_device("cuda:7")


def test_sizes_are_checked_before_anything_is_built():
    checked_sizes({"hidden": 8, "window": None, "buckets": 0}, "cfg", zero_ok=("buckets",))
    for bad in (0, -1, 1.5, True, "8", 10 ** 12):
        with pytest.raises(CheckpointError, match="hidden must be a whole number"):
            checked_sizes({"hidden": bad}, "cfg")


def test_a_model_too_large_is_refused_before_allocation():
    built = build_bounded(lambda: torch.nn.Linear(4, 4), "cfg")
    assert isinstance(built, torch.nn.Linear) and built.weight.device.type == "cpu"
    with pytest.raises(CheckpointError, match="more than 1,000"):
        build_bounded(lambda: torch.nn.Embedding(10 ** 6, 10 ** 6), "cfg", limit=1000)


def test_a_broken_plugin_fails_only_when_asked_for(tmp_path, monkeypatch):
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[attnkit.apps]\nbroken = no_such_module:APP\n"
                                           "fake = json:loads\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = AppRegistry()
    assert {"translate", "sentiment", "caption", "broken", "fake"} <= set(registry.names())
    with pytest.raises(UsageError, match="cannot be loaded"):
        registry["broken"]
    with pytest.raises(UsageError, match="not an attnkit App"):
        registry["fake"]
    with pytest.raises(KeyError):
        registry["nothing"]
    assert registry["translate"].name == "translate"
    assert "no_such_module" not in sys.modules
