"""fetch() through file:// URLs and safe_extract() against hostile archives."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile

import pytest

from attnkit.data.download import cache_dir, fetch, safe_extract
from attnkit.errors import DataError, DownloadError


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def source(tmp_path):
    data = b"english\tfrench\n" * 100
    path = tmp_path / "src" / "data.txt"
    path.parent.mkdir()
    path.write_bytes(data)
    return path, data


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("ATTNKIT_CACHE")
    assert cache_dir().parts[-2:] == (".cache", "attnkit")


def test_fetch_ok_and_reuse(source, tmp_path):
    path, data = source
    cache = tmp_path / "cache"
    got = fetch(path.as_uri(), sha256=_sha(data), cache=cache, progress=False)
    assert got == cache / "data.txt" and got.read_bytes() == data
    # Reuse: the source is gone, the cached copy with the right checksum is returned.
    path.unlink()
    again = fetch(path.as_uri(), sha256=_sha(data), cache=cache, progress=False)
    assert again == got
    assert [p.name for p in cache.iterdir()] == ["data.txt"]  # no temp files left


def test_fetch_env_cache_and_filename(source, tmp_path, monkeypatch):
    path, data = source
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "envcache"))
    got = fetch(path.as_uri(), sha256=_sha(data).upper(), filename="x.tsv", progress=False)
    assert got == tmp_path / "envcache" / "x.tsv"


def test_fetch_mismatch_deletes(source, tmp_path):
    path, data = source
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(DownloadError) as info:
        fetch(path.as_uri(), sha256=wrong, cache=cache, progress=False)
    assert wrong in str(info.value) and _sha(data) in str(info.value)
    assert list(cache.iterdir()) == []


def test_fetch_replaces_corrupt_cached_copy(source, tmp_path):
    path, data = source
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "data.txt").write_bytes(b"corrupt")
    got = fetch(path.as_uri(), sha256=_sha(data), cache=cache, progress=False)
    assert got.read_bytes() == data


def test_fetch_missing_source_and_bad_sha(tmp_path):
    with pytest.raises(DownloadError, match="could not download"):
        fetch((tmp_path / "nope.txt").as_uri(), sha256="a" * 64, cache=tmp_path / "c",
              progress=False)
    assert list((tmp_path / "c").iterdir()) == []
    with pytest.raises(ValueError, match="64 hex"):
        fetch("file:///x", sha256="abc", cache=tmp_path)


# ---------------------------------------------------------------- archives
def _zip(path, members: dict[str, bytes], links: dict[str, str] | None = None):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, target)
    return path


def _tar(path, members: dict[str, bytes], links: dict[str, str] | None = None, hard=False):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return path


def test_extract_good_zip_and_tar(tmp_path):
    z = _zip(tmp_path / "a.zip", {"fra.txt": b"hi\tsalut\n", "sub/b.txt": b"b"})
    out = safe_extract(z, tmp_path / "z")
    assert (tmp_path / "z" / "fra.txt").read_bytes() == b"hi\tsalut\n"
    assert sorted(p.name for p in out) == ["b.txt", "fra.txt"]
    t = _tar(tmp_path / "a.tar.gz", {"fra.txt": b"x", "d/y.txt": b"y"}, {"d/link": "../fra.txt"})
    safe_extract(t, tmp_path / "t")
    assert (tmp_path / "t" / "d" / "y.txt").read_bytes() == b"y"
    assert (tmp_path / "t" / "d" / "link").is_symlink()


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(
    "bad, links",
    [
        ("../evil.txt", None),
        ("/tmp/attnkit_evil_abs.txt", None),
        ("ok/../../evil.txt", None),
        (None, {"link": "../../outside"}),
        (None, {"link": "/etc/passwd"}),
    ],
)
def test_extract_rejects_and_writes_nothing(tmp_path, kind, bad, links):
    members = {"good_first.txt": b"good"}
    if bad:
        members[bad] = b"evil"
    make = _zip if kind == "zip" else _tar
    archive = make(tmp_path / f"bad.{kind}", members, links)
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as info:
        safe_extract(archive, dest)
    named = bad if bad else "link"
    assert repr(named) in str(info.value)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def test_extract_rejects_outside_hardlink(tmp_path):
    archive = _tar(tmp_path / "h.tar", {"a.txt": b"a"}, {"h": "../../x"}, hard=True)
    with pytest.raises(DataError, match="'h'"):
        safe_extract(archive, tmp_path / "dest")


def test_extract_not_an_archive(tmp_path):
    p = tmp_path / "x.zip"
    p.write_bytes(b"plain text")
    with pytest.raises(DataError, match="not a zip or tar"):
        safe_extract(p, tmp_path / "d")


def test_extract_refuses_a_fifo_member_before_writing_anything(tmp_path):
    archive = tmp_path / "f.tar"
    with tarfile.open(archive, "w") as tf:
        tf.addfile(tarfile.TarInfo("first.txt"), io.BytesIO(b""))
        fifo = tarfile.TarInfo("pipe")
        fifo.type = tarfile.FIFOTYPE
        tf.addfile(fifo)
    with pytest.raises(DataError, match="'pipe'"):
        safe_extract(archive, tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []
