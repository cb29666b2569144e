"""The run-folder rules shared by every app (attnkit.apps.runs)."""

import json
import os
import subprocess
import sys

import pytest

from attnkit.apps import runs
from attnkit.errors import CheckpointError, UsageError


def _run_folder(path, app="translate", **extra):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"app": app, **extra}), encoding="utf-8")
    return path


def test_read_json_names_the_file_for_every_way_it_can_be_unreadable(tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"model\.json: the model is not valid JSON .*line 1"):
        runs.read_json(bad, "the model")
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(CheckpointError, match="model.json: the model is not UTF-8"):
        runs.read_json(bad, "the model")
    with pytest.raises(CheckpointError, match="missing"):
        runs.read_json(tmp_path / "absent.json")
    bad.write_bytes(b'\xef\xbb\xbf{"a": 1}')  # a BOM is accepted
    assert runs.read_json(bad) == {"a": 1}


def test_read_config_checks_the_app_and_the_format(tmp_path):
    run = _run_folder(tmp_path / "r", app="caption")
    with pytest.raises(CheckpointError, match="is a caption run, not a sentiment run"):
        runs.read_config(run, "sentiment")
    assert runs.read_config(run, "caption")["format"] == 1      # no field: an old run
    _run_folder(run, app="caption", format=99)
    with pytest.raises(CheckpointError, match="format 99 is not one this attnkit reads"):
        runs.read_config(run, "caption")
    with pytest.raises(CheckpointError, match="not a run folder"):
        runs.read_config(tmp_path, "caption")
    with pytest.raises(CheckpointError, match="no such run folder"):
        runs.read_config(tmp_path / "nope", "caption")


def test_a_new_run_refuses_a_folder_holding_a_run_unless_overwritten(tmp_path):
    run = _run_folder(tmp_path / "r")
    (run / "last").mkdir()
    (run / "best.safetensors").write_bytes(b"x")
    with pytest.raises(CheckpointError, match="continue it with --resume"):
        with runs.start_run(run, app="translate"):
            pass
    assert (run / "best.safetensors").exists()           # nothing touched
    with runs.start_run(run, app="translate", overwrite=True) as out:
        assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_overwrite_never_empties_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with runs.start_run(tmp_path, app="translate", overwrite=True):
        pass
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_run_stopped_before_its_first_checkpoint_says_how_to_start_again(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "best.safetensors").write_bytes(b"x")         # killed inside the first checkpoint
    with pytest.raises(CheckpointError, match="before its first checkpoint.*--overwrite"):
        with runs.start_run(run, app="translate", resume=True):
            pass
    with pytest.raises(CheckpointError, match="before its first checkpoint.*--overwrite"):
        with runs.start_run(run, app="translate"):
            pass
    with pytest.raises(CheckpointError, match="nothing to resume"):
        with runs.start_run(tmp_path / "empty", app="translate", resume=True):
            pass
    with pytest.raises(UsageError, match="contradict"):
        with runs.start_run(run, app="translate", resume=True, overwrite=True):
            pass


def test_resume_of_another_apps_run_is_refused(tmp_path):
    run = _run_folder(tmp_path / "r", app="sentiment")
    (run / "last").mkdir()
    with pytest.raises(CheckpointError, match="is a sentiment run, not a caption run"):
        with runs.start_run(run, app="caption", resume=True):
            pass


def test_a_second_process_cannot_lock_a_run_and_is_told_the_holders_pid(tmp_path):
    code = ("import sys; from attnkit.apps.runs import RunLock\n"
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


def test_check_resume_applies_budgets_and_refuses_changes():
    stored = {"seed": 0, "epochs": 8, "max_minutes": 2.0, "data": "synthetic"}
    assert runs.check_resume(stored, {"seed": None, "epochs": 12, "max_minutes": 0.4}) == {
        "epochs": 12, "max_minutes": 0.4}
    assert runs.check_resume(stored, {"seed": 0, "data": "synthetic"}) == {}
    with pytest.raises(UsageError, match="--seed 1 differs from the resumed run's 0"):
        runs.check_resume(stored, {"seed": 1})
