"""Atomic writes, and the two writes that cannot be atomic refusing links (`attnkit.fileio`)."""

import pytest

from attnkit.errors import CheckpointError
from attnkit.fileio import append_text, atomic_write_text, read_limited, truncate_file


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


def test_read_limited(tmp_path):
    (tmp_path / "f").write_bytes(b"12345")
    assert read_limited(tmp_path / "f", "a file", limit=5) == b"12345"
    with pytest.raises(CheckpointError, match="larger than 4 bytes"):
        read_limited(tmp_path / "f", "a file", limit=4)
    with pytest.raises(CheckpointError, match="not a regular file"):
        read_limited("/dev/zero", "a file", limit=None)
    with pytest.raises(CheckpointError, match="is missing"):
        read_limited(tmp_path / "none", "a file", limit=None)
