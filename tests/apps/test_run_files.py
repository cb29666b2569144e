"""A run folder as the apps read it (`attnkit.apps.run_files`): its config.json (the app, the
format) and its files (regular files only, no link out of the run, size caps, one error line
naming the file)."""

import json

import pytest
import torch

from attnkit.apps.results import Loaded
from attnkit.apps.run_files import FORMAT, read_config, read_run, run_file
from attnkit.errors import CheckpointError
from attnkit.fileio import checked_file
from attnkit.training import save_weights


def _run_folder(path, app="translate", **extra):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"app": app, **extra}), encoding="utf-8")
    return path




def test_devices_and_huge_files_are_refused_without_reading_them(tmp_path):
    with pytest.raises(CheckpointError, match="not a regular file"):
        checked_file("/dev/zero", "a file")
    (tmp_path / "big.json").write_bytes(b" " * 2000)
    with pytest.raises(CheckpointError, match="more than the 1,000"):
        run_file(tmp_path, "big.json", "the file", limit=1000)


def test_read_config_checks_the_app_and_the_format(tmp_path):
    run = _run_folder(tmp_path / "r", app="caption", format=FORMAT)
    with pytest.raises(CheckpointError, match="is a caption run, not a sentiment run"):
        read_config(run, "sentiment")
    assert read_config(run, "caption")["format"] == FORMAT
    for version in (None, 1, 99):   # no migrations: another format is one clear error
        _run_folder(run, app="caption", format=version)
        with pytest.raises(CheckpointError, match=f"format {version} is not the one"):
            read_config(run, "caption")
    with pytest.raises(CheckpointError, match="not a run folder"):
        read_config(tmp_path, "caption")
    with pytest.raises(CheckpointError, match="no such run folder"):
        read_config(tmp_path / "nope", "caption")


def test_read_run_reads_config_model_config_pipeline_then_weights(tmp_path):
    run = _run_folder(tmp_path / "run", app="toy", format=FORMAT, size=3)
    torch.manual_seed(0)
    trained = torch.nn.Linear(3, 2)
    save_weights(trained, run / "best.safetensors")
    calls = []

    def model_config(path, config):
        calls.append(("model_config", path, config["size"]))
        return config["size"]

    def pipeline(path, config, size):
        calls.append(("pipeline", size))
        return f"pipeline of {size}"

    loaded = read_run(Loaded, run, "toy", model_config=model_config, pipeline=pipeline,
                      build=lambda size: torch.nn.Linear(size, 2),
                      describe=lambda size: f"linear {size} -> 2", model_file="model.json",
                      device="cpu")
    assert calls == [("model_config", run, 3), ("pipeline", 3)]
    assert isinstance(loaded, Loaded) and loaded.path == run and loaded.app == "toy"
    assert loaded.pipeline == "pipeline of 3" and loaded.config["size"] == 3
    assert loaded.description == "linear 3 -> 2" and loaded.device == "cpu"
    assert not loaded.model.training
    assert torch.equal(loaded.model.weight, trained.weight)
    with pytest.raises(CheckpointError, match="is a toy run, not a other run"):
        read_run(Loaded, run, "other", model_config=model_config, pipeline=pipeline,
                 build=lambda size: torch.nn.Linear(size, 2), describe=str,
                 model_file="model.json")
    with pytest.raises(CheckpointError):   # no such weights: the model is never built
        read_run(Loaded, run, "toy", model_config=model_config, pipeline=pipeline,
                 build=lambda size: torch.nn.Linear(size, 2), describe=str,
                 model_file="model.json", weights="last")
