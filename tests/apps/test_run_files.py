"""A run folder as the apps read it (`attnkit.apps.run_files`): its config.json (the app, the
format) and its files (regular files only, no link out of the run, size caps, one error line
naming the file)."""

import json

import pytest

from attnkit.apps.run_files import read_config, run_file
from attnkit.errors import CheckpointError
from attnkit.fileio import checked_file


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
    run = _run_folder(tmp_path / "r", app="caption")
    with pytest.raises(CheckpointError, match="is a caption run, not a sentiment run"):
        read_config(run, "sentiment")
    assert read_config(run, "caption")["format"] == 1      # no field: an old run
    _run_folder(run, app="caption", format=99)
    with pytest.raises(CheckpointError, match="format 99 is not one this attnkit reads"):
        read_config(run, "caption")
    with pytest.raises(CheckpointError, match="not a run folder"):
        read_config(tmp_path, "caption")
    with pytest.raises(CheckpointError, match="no such run folder"):
        read_config(tmp_path / "nope", "caption")
