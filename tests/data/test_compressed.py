"""open_maybe_gzip: gzip told by content, not name; a missing file or a folder is a DataError."""

from __future__ import annotations

import gzip

import pytest

from attnkit.data.compressed import open_maybe_gzip
from attnkit.errors import DataError


def test_gzip_told_by_its_first_bytes(tmp_path):
    packed, plain = tmp_path / "a.txt", tmp_path / "b.gz"
    packed.write_bytes(gzip.compress(b"hello\n"))
    plain.write_bytes(b"\x1fhello\n")   # gzip-like name and first byte, but plain
    with open_maybe_gzip(packed) as f:
        assert f.read() == b"hello\n"
    with open_maybe_gzip(plain) as f:
        assert f.read() == b"\x1fhello\n"


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(DataError, match=r"none\.tsv: file not found"):
        open_maybe_gzip(tmp_path / "none.tsv")
    with pytest.raises(DataError, match="cannot read"):
        open_maybe_gzip(tmp_path)
