"""IMDB readers: folder, tar, JSONL, CSV; bad inputs; the validation split; the shared copy."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from attnkit.data.imdb import (
    IMDB_SHA256,
    ReadStats,
    Review,
    download_imdb,
    load_split,
    read_csv,
    read_jsonl,
    read_tar,
    split_validation,
)
from attnkit.errors import DataError


def _write_folder(root):
    for split in ("train", "test"):
        for label, texts in (("pos", ["Loved it.", "Great<br />fun"]), ("neg", ["Awful."])):
            folder = root / "aclImdb" / split / label
            folder.mkdir(parents=True)
            for i, t in enumerate(texts):
                (folder / f"{i}_{8 if label == 'pos' else 2}.txt").write_text(t, encoding="utf-8")
    (root / "aclImdb" / "train" / "unsup").mkdir()  # ignored


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_folder_reader(tmp_path):
    _write_folder(tmp_path)
    reviews = load_split(tmp_path, "train")
    assert sorted((r.text, r.label) for r in reviews) == [
        ("Awful.", 0), ("Great<br />fun", 1), ("Loved it.", 1)]
    assert len(load_split(tmp_path / "aclImdb", "test")) == 3


def test_tar_reader_and_unsafe_member(tmp_path):
    good = tmp_path / "aclImdb_v1.tar.gz"
    _tar(good, [("aclImdb/train/pos/0_9.txt", b"Superb."), ("aclImdb/train/neg/1_1.txt", b"Bad."),
                ("aclImdb/test/pos/2_7.txt", b"Nice."), ("aclImdb/README", b"readme")])
    assert sorted(r.label for r in load_split(good, "train")) == [0, 1]
    assert load_split(good, "test") == [Review("Nice.", 1)]
    for bad_name in ("../evil.txt", "/etc/evil.txt", "aclImdb/train/../../x.txt"):
        bad = tmp_path / "bad.tar.gz"
        _tar(bad, [("aclImdb/train/pos/0_9.txt", b"ok"), (bad_name, b"x")])
        with pytest.raises(DataError, match="unsafe member") as err:
            read_tar(bad, "train")
        assert str(bad) in str(err.value) and bad_name in str(err.value)
        stats = ReadStats()
        assert len(read_tar(bad, "train", skip_bad=True, stats=stats)) == 1
        assert stats.skipped == 1


def _jsonl_gz(path, lines: list[bytes]):
    with gzip.open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")


def test_jsonl_labels_and_errors_name_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl.gz"
    _jsonl_gz(path, [json.dumps({"text": "good", "label": 1}).encode(),
                     json.dumps({"text": "bad", "label": "neg"}).encode(),
                     json.dumps({"text": "fine", "label": "pos"}).encode()])
    assert [r.label for r in read_jsonl(path)] == [1, 0, 1]
    assert [r.label for r in load_split(tmp_path, "train")] == [1, 0, 1]
    cases = [
        (b'{"text": "x"}', "missing field 'label'"),
        (b'{"label": 1}', "missing field 'text'"),
        (b'{"text": "x", "label": 2}', "label must be"),
        (b'{"text": "x", "label": "positive"}', "label must be"),
        (b'{"text": "  ", "label": 1}', "empty review"),
        (b'{"text": "caf\xe9", "label": 1}', "UTF-8"),
        (b'{"text": ', "invalid JSON"),
    ]
    for raw, message in cases:
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(b'{"text": "ok", "label": 0}\n' + raw + b"\n")
        with pytest.raises(DataError, match=message) as err:
            read_jsonl(bad)
        assert err.value.path == str(bad) and err.value.line == 2
        stats = ReadStats()
        assert read_jsonl(bad, skip_bad=True, stats=stats) == [Review("ok", 0)]
        assert (stats.read, stats.skipped) == (1, 1)


def test_csv_reader(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text('review,sentiment\n"Fun, and\nsmart",pos\nDull,0\n', encoding="utf-8")
    reviews = read_csv(path, text_column="review", label_column="sentiment")
    assert reviews == [Review("Fun, and\nsmart", 1), Review("Dull", 0)]
    with pytest.raises(DataError, match="no column 'text'"):
        read_csv(path)
    path.write_text("text,label\nok,1\nmeh,3\n", encoding="utf-8")
    with pytest.raises(DataError, match="label must be") as err:
        read_csv(path)
    assert err.value.line == 3
    path.write_bytes(b"text,label\nok,1\n\xff\xfe,0\n")
    with pytest.raises(DataError, match="UTF-8") as err:
        read_csv(path)
    assert err.value.line == 3


def test_folder_undecodable_file_is_named(tmp_path):
    _write_folder(tmp_path)
    bad = tmp_path / "aclImdb" / "train" / "pos" / "9_9.txt"
    bad.write_bytes(b"\xff\xfe bad")
    with pytest.raises(DataError, match="UTF-8") as err:
        load_split(tmp_path, "train")
    assert err.value.path == str(bad)


def test_validation_split_is_deterministic():
    items = list(range(100))
    train, valid = split_validation(items, 0.2, seed=3)
    assert len(valid) == 20 and sorted(train + valid) == items
    assert split_validation(items, 0.2, seed=3) == (train, valid)
    assert split_validation(items, 0.2, seed=4)[1] != valid
    with pytest.raises(ValueError):
        split_validation(items, 1.0, seed=0)


def test_missing_path_and_checksum_constant(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_split(tmp_path / "nope.jsonl", "train")
    assert len(IMDB_SHA256) == 64


def test_shared_imdb(imdb_dir):
    train = load_split(imdb_dir, "train")
    assert len(train) == 25000
    assert sum(r.label for r in train) == 12500
    assert len(load_split(imdb_dir / "test.jsonl.gz", "test")) == 25000


def test_download_checks_the_checksum(tmp_path):
    import hashlib

    from attnkit.errors import DownloadError

    src = tmp_path / "src.tar.gz"
    _tar(src, [("aclImdb/test/neg/0_1.txt", b"Dire.")])
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    path = download_imdb(tmp_path / "cache", url=src.as_uri(), sha256=digest)
    assert path.parent == tmp_path / "cache" and load_split(path, "test") == [Review("Dire.", 0)]
    with pytest.raises(DownloadError):
        download_imdb(tmp_path / "cache2", url=src.as_uri(), sha256="0" * 64)
