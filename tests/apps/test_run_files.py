"""Reading a run's files (`attnkit.apps.run_files`): regular files only, no link out of the
run, size caps, one error line naming the file; the weights file of a run."""

import pytest

from attnkit.apps.run_files import checked_file, read_json, run_file, weights_file
from attnkit.errors import CheckpointError, UsageError


def test_a_file_inside_the_run_reads(tmp_path):
    (tmp_path / "config.json").write_text('\ufeff{"a": 1}', encoding="utf-8")
    assert read_json(tmp_path / "config.json", "the config", root=tmp_path) == {"a": 1}
    (tmp_path / "link.json").symlink_to(tmp_path / "config.json")   # a link inside: fine
    assert read_json(tmp_path / "link.json", root=tmp_path) == {"a": 1}


@pytest.mark.parametrize("make, message", [
    (lambda p, o: p.symlink_to(o / "elsewhere.json"), "outside the run folder"),
    (lambda p, o: p.symlink_to("/dev/zero"), "outside the run folder"),
    (lambda p, o: p.mkdir(), "is a folder"),
    (lambda p, o: p.write_bytes(b"\xff\xfe{"), "not UTF-8"),
    (lambda p, o: p.write_text("{nope"), "not valid JSON"),
    (lambda p, o: p.write_text("[" * 100_000), "nests too deeply|not valid JSON"),
    (lambda p, o: None, "is missing"),
])
def test_every_bad_file_is_one_checkpoint_error(tmp_path, make, message):
    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir()
    other.mkdir()
    (other / "elsewhere.json").write_text("{}")
    make(run / "config.json", other)
    with pytest.raises(CheckpointError, match=message):
        read_json(run / "config.json", "the run's config", root=run)


def test_devices_and_huge_files_are_refused_without_reading_them(tmp_path):
    with pytest.raises(CheckpointError, match="not a regular file"):
        checked_file("/dev/zero", "a file")
    (tmp_path / "big.json").write_bytes(b" " * 2000)
    with pytest.raises(CheckpointError, match="more than the 1,000"):
        run_file(tmp_path, "big.json", "the file", limit=1000)


def test_the_weights_file_of_a_run(tmp_path):
    with pytest.raises(CheckpointError, match="no best weights yet"):
        weights_file(tmp_path, "best")
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        weights_file(tmp_path, "last")
    with pytest.raises(UsageError, match="'best' or 'last'"):
        weights_file(tmp_path, "first")
    (tmp_path / "best.safetensors").write_bytes(b"x")
    assert weights_file(tmp_path) == tmp_path / "best.safetensors"
