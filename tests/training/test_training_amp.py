"""resolve_amp: "auto" turns bf16 on only where it is fast; forcing it on a CPU without native
bf16 warns; TrainConfig.amp accepts the spellings and old bool configs."""

from __future__ import annotations

import importlib.util
import json
import types
import warnings
from pathlib import Path

import pytest
import torch

from attnkit.training import TrainConfig, amp
from attnkit.training.amp import resolve_amp

_spec = importlib.util.spec_from_file_location(
    "synthetic_task", Path(__file__).with_name("synthetic_task.py"))
task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(task)

CPU = torch.device("cpu")


@pytest.fixture
def native_bf16(monkeypatch):
    def set_to(value: bool):
        monkeypatch.setattr(amp, "cpu_has_native_bf16", lambda: value)
    return set_to


@pytest.mark.parametrize("native", [True, False])
def test_auto_on_cpu_follows_native_bf16(native_bf16, native):
    native_bf16(native)
    assert resolve_amp("auto", CPU) is native
    assert resolve_amp("auto", "cpu") is native


def test_off_is_off_everywhere(native_bf16):
    native_bf16(True)
    assert resolve_amp("off", CPU) is False and resolve_amp(False, CPU) is False


def test_forced_on_cpu_without_native_bf16_warns(native_bf16):
    native_bf16(False)
    with pytest.warns(RuntimeWarning, match="much slower"):
        assert resolve_amp(True, CPU) is True
    native_bf16(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_amp("on", CPU) is True


@pytest.mark.parametrize("major, expected", [(8, True), (7, False)])
def test_auto_on_cuda_needs_ampere(monkeypatch, major, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: types.SimpleNamespace(major=major))
    assert resolve_amp("auto", torch.device("cuda:0")) is expected


def test_auto_elsewhere_is_float32():
    assert resolve_amp("auto", torch.device("meta")) is False


@pytest.mark.parametrize("bad", ["yes", 1, None, "AUTO"])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match="TrainConfig.amp"):
        TrainConfig(amp=bad)


def test_config_default_and_old_bool_configs():
    assert TrainConfig().amp == "auto"
    for value in (True, False, "on", "off"):
        cfg = TrainConfig.from_dict({"epochs": 1, "amp": value})
        assert TrainConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("native", [True, False])
def test_fit_autocasts_as_resolved_and_records_it(tmp_path, native_bf16, native):
    native_bf16(native)
    seen = []

    def loss(model, batch):
        seen.append(torch.is_autocast_enabled("cpu"))
        return task.loss_fn(model, batch)

    cfg = TrainConfig(epochs=1, batch_size=16, device="cpu", progress=False)
    task.make_trainer(tmp_path, cfg, loss=loss, n=32).fit()
    assert seen == [native, native]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["train"]["amp"] == "auto" and config["runtime"]["amp_resolved"] is native
    assert config["runtime"]["machine"]["isa"] == torch.backends.cpu.get_cpu_capability()
