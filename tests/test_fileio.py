"""Atomic writes, the two writes that cannot be atomic refusing links, and checked reads:
regular files only, no link out of their folder, size caps, one error naming the file
(`attnkit.fileio`)."""

import pytest

from attnkit.errors import CheckpointError
from attnkit.fileio import (
    append_text,
    atomic_write_text,
    read_json,
    read_regular_file,
    truncate_file,
    write_files,
)


def test_atomic_write_replaces_a_link_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "log").symlink_to(outside)
    atomic_write_text(tmp_path / "log", "new")
    assert outside.read_text() == "keep" and not (tmp_path / "log").is_symlink()


def test_appending_and_truncating_refuse_links(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "train.log").symlink_to(outside)
    with pytest.raises(CheckpointError, match="is a link"):
        append_text(tmp_path / "train.log", "line\n")
    with pytest.raises(CheckpointError, match="is a link"):
        truncate_file(tmp_path / "train.log", 0)
    assert outside.read_text() == "keep"
    append_text(tmp_path / "ok.log", "a\n")
    append_text(tmp_path / "ok.log", "b\n")
    truncate_file(tmp_path / "ok.log", 2)
    assert (tmp_path / "ok.log").read_text() == "a\n"


def test_read_regular_file(tmp_path):
    (tmp_path / "f").write_bytes(b"12345")
    assert read_regular_file(tmp_path / "f", "a file", limit=5) == b"12345"
    with pytest.raises(CheckpointError, match="larger than 4 bytes"):
        read_regular_file(tmp_path / "f", "a file", limit=4)
    with pytest.raises(CheckpointError, match="not a regular file"):
        read_regular_file("/dev/zero", "a file", limit=None)
    with pytest.raises(CheckpointError, match="is missing"):
        read_regular_file(tmp_path / "none", "a file", limit=None)


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


def test_read_json_names_the_file_for_every_way_it_can_be_unreadable(tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"model\.json: the model is not valid JSON .*line 1"):
        read_json(bad, "the model")
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(CheckpointError, match="model.json: the model is not UTF-8"):
        read_json(bad, "the model")
    with pytest.raises(CheckpointError, match="missing"):
        read_json(tmp_path / "absent.json")
    bad.write_bytes(b'\xef\xbb\xbf{"a": 1}')  # a BOM is accepted
    assert read_json(bad) == {"a": 1}


def test_write_files_writes_each_kind_by_name(tmp_path):
    class Vocabulary:
        def to_json(self, path):
            path.write_text("vocab")

    write_files(tmp_path, {"a.bin": b"\x00\x01", "b.json": {"x": [1]}, "c.json": Vocabulary()})
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert read_json(tmp_path / "b.json") == {"x": [1]}
    assert (tmp_path / "c.json").read_text() == "vocab"
