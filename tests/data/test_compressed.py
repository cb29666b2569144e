"""open_maybe_gzip: gzip told by content, not name; a missing file, a folder or a device is a
DataError; every read within the data caps (#47: /dev/zero and gzip bombs filled memory)."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import pytest

from attnkit.data import compressed, imdb
from attnkit.data.caption_files import read_coco_captions, read_flickr_tokens
from attnkit.data.compressed import capped_lines, open_maybe_gzip, outside_reason, read_data
from attnkit.data.pairs import read_pairs
from attnkit.data.translation_splits import data_spec, eval_pairs
from attnkit.errors import DataError


def test_gzip_told_by_its_first_bytes(tmp_path):
    packed, plain = tmp_path / "a.txt", tmp_path / "b.gz"
    packed.write_bytes(gzip.compress(b"hello\n"))
    plain.write_bytes(b"\x1fhello\n")   # gzip-like name and first byte, but plain
    with open_maybe_gzip(packed) as f:
        assert f.read() == b"hello\n"
    with open_maybe_gzip(plain) as f:
        assert f.read() == b"\x1fhello\n"


def test_missing_file_folder_and_device(tmp_path):
    with pytest.raises(DataError, match=r"none\.tsv: no such file or folder"):
        open_maybe_gzip(tmp_path / "none.tsv")
    with pytest.raises(DataError, match="is a folder"):
        open_maybe_gzip(tmp_path)
    for reader in (open_maybe_gzip, read_data, read_pairs):
        with pytest.raises(DataError, match="/dev/zero: is a device, pipe or socket"):
            reader("/dev/zero")


@pytest.fixture
def small_caps(monkeypatch):
    """Caps of 100 bytes a line and 1,000 a file, so a bomb is small."""
    monkeypatch.setattr(compressed, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(compressed, "MAX_DATA_BYTES", 1000)


def test_a_long_line_or_a_long_file_is_one_error(tmp_path, small_caps):
    bomb = tmp_path / "bomb.tsv.gz"
    bomb.write_bytes(gzip.compress(b"a\tb\n" + b"a" * 10_000))
    with pytest.raises(DataError, match=r"bomb\.tsv\.gz:2: a line longer than 100 bytes"):
        read_pairs(bomb)
    many = tmp_path / "many.tsv"
    many.write_bytes(b"one\tun\n" * 200)
    with pytest.raises(DataError, match="more than 1,000 bytes of text"):
        list(capped_lines(open(many, "rb"), many))
    with pytest.raises(DataError, match="more than 1,000 bytes of text"):
        read_data(many)


def test_every_reader_stops_at_its_cap(tmp_path, small_caps):
    jsonl, csv = tmp_path / "r.jsonl.gz", tmp_path / "r.csv.gz"
    jsonl.write_bytes(gzip.compress(b"x" * 5000))
    csv.write_bytes(gzip.compress(b"text,label\n" + b"x" * 5000))
    with pytest.raises(DataError, match="a line longer than"):
        imdb.load_split(jsonl, "train")
    with pytest.raises(DataError, match="more than 1,000 bytes"):
        imdb.load_split(csv, "train")
    images = tmp_path / "images"
    images.mkdir()
    for reader in (read_coco_captions, read_flickr_tokens):
        with pytest.raises(DataError, match="is a device"):
            reader("/dev/zero", images)
        with pytest.raises(DataError, match="more than 1,000 bytes"):
            reader(csv, images)


def test_a_huge_review_in_a_folder_or_a_tar_is_one_record(tmp_path, small_caps):
    folder = tmp_path / "aclImdb"
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            (folder / split / label).mkdir(parents=True)
    (folder / "train" / "pos" / "1_10.txt").write_text("fine film")
    (folder / "train" / "pos" / "2_10.txt").write_bytes(b"x" * 500)
    os.mkfifo(folder / "train" / "neg" / "3_1.txt")          # would block a plain read
    stats = imdb.ReadStats()
    reviews = imdb.load_split(folder, "train", skip_bad=True, stats=stats)
    assert [r.text for r in reviews] == ["fine film"] and stats.drops.total == 2
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        member = tarfile.TarInfo("aclImdb/train/pos/1_10.txt")
        member.size = 500
        tar.addfile(member, io.BytesIO(b"y" * 500))
    with pytest.raises(DataError, match=r"\[aclImdb/train/pos/1_10.txt\]: more than 100 bytes"):
        imdb.load_split(archive, "train")


def test_a_device_as_translation_data_is_named_so(tmp_path):
    """#47: ``--data /dev/zero`` said "no such file or folder"."""
    with pytest.raises(DataError, match="is a device, pipe or socket"):
        data_spec("/dev/zero")
    with pytest.raises(DataError, match="is a device, pipe or socket"):
        eval_pairs("/dev/zero", {"kind": "synthetic"})
    with pytest.raises(DataError, match="no such file or folder"):
        data_spec(str(tmp_path / "none.tsv"))


# outside_reason: absolute names, '..' parts and symbolic links out of the folder.
@pytest.mark.parametrize("name, why", [
    ("/etc/passwd", "absolute"), ("\\\\server\\share", "absolute"), ("C:/x.jpg", "absolute"),
    ("../x.jpg", "'..'"), ("a/../../x.jpg", "'..'"), ("a\\..\\..\\x.jpg", "'..'"),
])
def test_names_that_leave_the_folder(tmp_path, name, why):
    assert why in outside_reason(tmp_path.resolve(), name)


def test_inside_names_and_symbolic_links(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.jpg").write_bytes(b"x")
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "updir")
    os.symlink(root / "sub" / "a.jpg", root / "inner.jpg")
    root = root.resolve()
    assert outside_reason(root, "sub/a.jpg") is None
    assert outside_reason(root, "missing.jpg") is None   # absent but inside: the reader decides
    assert outside_reason(root, "inner.jpg") is None     # a link that stays inside
    assert "resolves outside" in outside_reason(root, "link.txt")
    assert "resolves outside" in outside_reason(root, "updir/secret.txt")
