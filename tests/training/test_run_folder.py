"""The rules of the run folder a training writes into (`attnkit.training.run_folder`)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from attnkit.errors import CheckpointError, UsageError
from attnkit.training import run_folder as runs


def _run_folder(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"app": "translate"}), encoding="utf-8")
    return path


def test_a_new_run_refuses_a_folder_holding_a_run_unless_overwritten(tmp_path):
    run = _run_folder(tmp_path / "r")
    (run / "last").mkdir()
    (run / "best.safetensors").write_bytes(b"x")
    with pytest.raises(CheckpointError, match="continue it with --resume"):
        with runs.claim_run(run):
            pass
    assert (run / "best.safetensors").exists()           # nothing touched
    with runs.claim_run(run, overwrite=True) as out:
        assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_overwrite_never_empties_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with runs.claim_run(tmp_path, overwrite=True):
        pass
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_run_stopped_before_its_first_checkpoint_says_how_to_start_again(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "best.safetensors").write_bytes(b"x")         # killed inside the first checkpoint
    with pytest.raises(CheckpointError, match="before its first checkpoint.*--overwrite"):
        with runs.claim_run(run, resume=True):
            pass
    with pytest.raises(CheckpointError, match="before its first checkpoint.*--overwrite"):
        with runs.claim_run(run):
            pass
    with pytest.raises(CheckpointError, match="nothing to resume"):
        with runs.claim_run(tmp_path / "empty", resume=True):
            pass


def test_a_second_process_cannot_lock_a_run_and_is_told_the_holders_pid(tmp_path):
    code = ("import sys; from attnkit.training.run_folder import RunLock\n"
            "try:\n    RunLock(sys.argv[1]).__enter__()\n"
            "except Exception as e:\n    print(e); sys.exit(3)\n")
    with runs.RunLock(tmp_path):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 3
        assert f"being trained by another process (PID {os.getpid()})" in out.stdout
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout                 # released on exit


def test_the_weights_file_of_a_run(tmp_path):
    with pytest.raises(CheckpointError, match="no best weights yet.*--resume"):
        runs.weights_file(tmp_path, "best")
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        runs.weights_file(tmp_path, "last")
    with pytest.raises(UsageError, match="'best' or 'last'"):
        runs.weights_file(tmp_path, "first")
    (tmp_path / "best.safetensors").write_bytes(b"x")
    assert runs.weights_file(tmp_path) == tmp_path / "best.safetensors"


def test_sizes_are_checked_before_anything_is_built():
    runs.checked_sizes({"hidden": 8, "window": None, "buckets": 0}, "cfg", zero_ok=("buckets",))
    for bad in (0, -1, 1.5, True, "8", 10 ** 12):
        with pytest.raises(CheckpointError, match="hidden must be a whole number"):
            runs.checked_sizes({"hidden": bad}, "cfg")


def test_a_model_too_large_is_refused_before_allocation():
    built = runs.build_bounded(lambda: torch.nn.Linear(4, 4), "cfg")
    assert isinstance(built, torch.nn.Linear) and built.weight.device.type == "cpu"
    with pytest.raises(CheckpointError, match="more than 1,000"):
        runs.build_bounded(lambda: torch.nn.Embedding(10 ** 6, 10 ** 6), "cfg", limit=1000)
