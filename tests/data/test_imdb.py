"""IMDB readers: folder, tar, JSONL, CSV; bad inputs; the validation split; the shared copy."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from attnkit.data import imdb
from attnkit.data.imdb import (
    IMDB_SHA256,
    ReadStats,
    Review,
    load_split,
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
            load_split(bad, "train")
        assert str(bad) in str(err.value) and bad_name in str(err.value)
        stats = ReadStats()
        assert len(load_split(bad, "train", skip_bad=True, stats=stats)) == 1
        assert stats.drops.total == 1


def _jsonl_gz(path, lines: list[bytes]):
    with gzip.open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")


def test_jsonl_labels_and_errors_name_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl.gz"
    _jsonl_gz(path, [json.dumps({"text": "good", "label": 1}).encode(),
                     json.dumps({"text": "bad", "label": "neg"}).encode(),
                     json.dumps({"text": "fine", "label": "pos"}).encode()])
    assert [r.label for r in load_split(path, "train")] == [1, 0, 1]
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
            load_split(bad, "train")
        assert err.value.path == str(bad) and err.value.line == 2
        stats = ReadStats()
        assert load_split(bad, "train", skip_bad=True, stats=stats) == [Review("ok", 0)]
        assert (stats.read, stats.drops.total) == (1, 1)


def test_csv_reader(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text('review,sentiment\n"Fun, and\nsmart",pos\nDull,0\n', encoding="utf-8")
    reviews = load_split(path, "train", text_column="review", label_column="sentiment")
    assert reviews == [Review("Fun, and\nsmart", 1), Review("Dull", 0)]
    with pytest.raises(DataError, match="no column 'text'"):
        load_split(path, "train")
    path.write_text("text,label\nok,1\nmeh,3\n", encoding="utf-8")
    with pytest.raises(DataError, match="label must be") as err:
        load_split(path, "train")
    assert err.value.line == 3
    path.write_bytes(b"text,label\nok,1\n\xff\xfe,0\n")
    with pytest.raises(DataError, match="UTF-8") as err:
        load_split(path, "train")
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


def test_download_checks_the_checksum(tmp_path, monkeypatch):
    import hashlib

    from attnkit.errors import DownloadError

    src = tmp_path / "src.tar.gz"
    _tar(src, [("aclImdb/test/neg/0_1.txt", b"Dire.")])
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(imdb, "IMDB_URL", src.as_uri())
    with pytest.raises(DownloadError):
        load_split("download", "test")
    monkeypatch.setattr(imdb, "IMDB_SHA256", digest)
    assert load_split("download", "test") == [Review("Dire.", 0)]
    assert (tmp_path / "cache" / "aclImdb_v1.tar.gz").is_file()


def test_csv_field_longer_than_the_csv_module_default(tmp_path):
    path = tmp_path / "long.csv"
    long_review = "word " * 40_000   # 200,000 characters; csv's default limit is 131,072
    path.write_text(f'text,label\n"{long_review}",pos\nshort,0\n', encoding="utf-8")
    for skip_bad in (False, True):
        stats = ReadStats()
        assert load_split(path, "train", skip_bad=skip_bad, stats=stats) == [
            Review(long_review, 1), Review("short", 0)]
        assert stats.drops.total == 0
    import csv
    assert csv.field_size_limit() == 131_072   # the module-wide limit is left as it was


def test_csv_bad_byte_costs_its_record_only(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_bytes(b"\xef\xbb\xbftext,label\none,1\ntwo,0\nthree,pos\ncaf\xe9,1\nsix,neg\n"
                     b'"multi\nline",1\n')
    with pytest.raises(DataError, match=r"reviews\.csv:5: not valid UTF-8 \(byte 0xe9\)"):
        load_split(path, "train")
    stats = ReadStats()
    reviews = load_split(path, "train", skip_bad=True, stats=stats)
    assert [r.text for r in reviews] == ["one", "two", "three", "six", "multi\nline"]
    assert (stats.read, stats.drops.total) == (5, 1)
    assert stats.drops.format(str(path)) == (f"dropped 1 record of {path}:\n"
                                       f"  1 not valid UTF-8 ({path}:5)")


def test_skipped_records_reported_by_reason(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"text": "ok", "label": 0}\n{"text": " ", "label": 1}\n{"text": \n'
                     b'{"text": "x", "label": 7}\n{"text": "", "label": 0}\n')
    stats = ReadStats()
    assert load_split(path, "train", skip_bad=True, stats=stats) == [Review("ok", 0)]
    assert stats.drops.format("r.jsonl") == (
        "dropped 4 records of r.jsonl:\n"
        f"  2 with an empty review (e.g. {path}:2, {path}:5)\n"
        f"  1 not valid JSON ({path}:3)\n"
        f"  1 with a label other than 0, 1, neg or pos ({path}:4)")


def test_byte_order_mark_opens_jsonl_folder_and_tar_files(tmp_path):
    bom = b"\xef\xbb\xbf"
    path = tmp_path / "train.jsonl"
    path.write_bytes(bom + b'{"text": "ok", "label": 1}\n' + bom + b'{"text": "no", "label": 0}\n')
    # Only the file start may hold the mark; on line 2 it is a JSON syntax error, on line 2.
    with pytest.raises(DataError, match=r"train\.jsonl:2: invalid JSON"):
        load_split(path, "train")
    assert load_split(path, "train", skip_bad=True) == [Review("ok", 1)]
    gz = tmp_path / "train.jsonl.gz"
    _jsonl_gz(gz, [bom + b'{"text": "ok", "label": 1}'])
    assert load_split(gz, "train") == [Review("ok", 1)]
    folder = tmp_path / "aclImdb" / "train"
    for label in ("pos", "neg"):
        (folder / label).mkdir(parents=True)
    (folder / "pos" / "0_9.txt").write_bytes(bom + b"Superb.")
    assert load_split(tmp_path / "aclImdb", "train") == [Review("Superb.", 1)]
    archive = tmp_path / "a.tar.gz"
    _tar(archive, [("aclImdb/train/neg/0_1.txt", bom + b"Bad.")])
    assert load_split(archive, "train") == [Review("Bad.", 0)]


def test_folder_refuses_links_out_of_the_data_folder(tmp_path):
    _write_folder(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash", encoding="utf-8")
    pos = tmp_path / "aclImdb" / "train" / "pos"
    (pos / "5_9.txt").symlink_to(secret)
    (pos / "6_9.txt").symlink_to(pos / "0_8.txt")           # a link that stays inside is fine
    with pytest.raises(DataError, match="resolves outside") as err:
        load_split(tmp_path, "train")
    assert err.value.path == str(pos / "5_9.txt")
    stats = ReadStats()
    reviews = load_split(tmp_path, "train", skip_bad=True, stats=stats)
    assert "root:x" not in {r.text for r in reviews} and len(reviews) == 4
    assert stats.drops.count("outside the data folder") == 1


def test_folder_does_not_follow_a_linked_folder_out(tmp_path):
    _write_folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "0_1.txt").write_text("not a review", encoding="utf-8")
    neg = tmp_path / "aclImdb" / "test" / "neg"
    for f in neg.iterdir():
        f.unlink()
    neg.rmdir()
    neg.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(DataError, match="folder resolves outside"):
        load_split(tmp_path, "test")
    stats = ReadStats()
    assert [r.label for r in load_split(tmp_path, "test", skip_bad=True, stats=stats)] == [1, 1]
    assert (stats.drops.total, stats.drops.reasons[0].examples) == (1, [str(neg)])


def test_folder_unreadable_entry_is_a_data_error(tmp_path):
    _write_folder(tmp_path)
    (tmp_path / "aclImdb" / "train" / "neg" / "7_1.txt").mkdir()   # a folder named like a review
    with pytest.raises(DataError, match=r"7_1\.txt: cannot read"):
        load_split(tmp_path, "train")
    assert len(load_split(tmp_path, "train", skip_bad=True)) == 3


@pytest.mark.parametrize("name", ["nope.x", "nope.csv", "nope.tar.gz"])
def test_missing_file_or_a_folder_is_a_data_error(tmp_path, name):
    for skip_bad in (False, True):
        with pytest.raises(DataError, match=rf"{name}: no such file or folder"):
            load_split(tmp_path / name, "train", skip_bad=skip_bad)
    with pytest.raises(DataError, match=str(tmp_path)):
        load_split(tmp_path, "train")
