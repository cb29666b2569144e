"""read_pairs on hand-made files (bad lines, gzip, attribution, strict) and the shared eng-fra."""

from __future__ import annotations

import gzip

import pytest

from attnkit.data.pairs import group_references, read_pairs
from attnkit.errors import DataError

GOOD = "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\nHi.\tSalut.\n"


def test_plain_with_attribution(tmp_path):
    p = tmp_path / "fra.txt"
    p.write_text(GOOD, encoding="utf-8")
    r = read_pairs(p)
    assert r.pairs == [("Go.", "Va !"), ("Hi.", "Salut.")]
    assert (r.drops.total, r.drops.format()) == (0, "")


def test_gzip_detected_by_magic(tmp_path):
    p = tmp_path / "pairs.txt"  # misleading name: content decides
    p.write_bytes(gzip.compress(("\ufeff" + GOOD).encode("utf-8")))
    assert read_pairs(p).pairs == [("Go.", "Va !"), ("Hi.", "Salut.")]


def test_bad_lines_counted_by_reason_with_line_numbers(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("A.\tB.\nno tab here\n\n\tonly french\nonly english\t  \r\nC.\tD.\r\n"
                 "still no tab\nnor here\n", encoding="utf-8")
    r = read_pairs(p)
    assert r.pairs == [("A.", "B."), ("C.", "D.")]
    assert r.drops.total == 5
    assert [(d.reason, d.count, d.examples) for d in r.drops.reasons] == [
        ("without a tab", 3, [f"{p}:2", f"{p}:7", f"{p}:8"]),
        ("with an empty English side", 1, [f"{p}:4"]),
        ("with an empty French side", 1, [f"{p}:5"]),
    ]
    assert r.drops.format(str(p)) == (f"dropped 5 lines of {p}:\n"
                                      f"  3 without a tab (e.g. {p}:2, {p}:7, {p}:8)\n"
                                      f"  1 with an empty English side ({p}:4)\n"
                                      f"  1 with an empty French side ({p}:5)")
    with pytest.raises(DataError) as info:
        read_pairs(p, strict=True)
    assert info.value.line == 2 and f"{p}:2: line without a tab" in str(info.value)


def test_strict_names_the_first_bad_line_whatever_its_reason(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("A.\tB.\nC.\t \nno tab\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tsv:2: line with an empty French side"):
        read_pairs(p, strict=True)
    assert read_pairs(p).drops.total == 2


def test_byte_order_mark_only_opens_the_file(tmp_path):
    p = tmp_path / "bom.tsv"
    p.write_text("\ufeffGo.\tVa !\n\ufeffHi.\tSalut.\nno tab\n", encoding="utf-8")
    r = read_pairs(p)
    # The mark on line 2 is text, not a file header; line numbers count from the file start.
    assert r.pairs == [("Go.", "Va !"), ("\ufeffHi.", "Salut.")]
    assert r.drops.reasons[0].examples == [f"{p}:3"]


def test_undecodable_bytes_name_file_and_line(tmp_path):
    p = tmp_path / "latin1.tsv"
    p.write_bytes(b"A.\tB.\nCaf\xe9.\tCaf\xe9.\n")
    with pytest.raises(DataError) as info:
        read_pairs(p)
    assert info.value.line == 2 and str(p) in str(info.value) and "xe9" in str(info.value)
    gz = tmp_path / "latin1.tsv.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    with pytest.raises(DataError, match=":2:"):
        read_pairs(gz)
    p.write_bytes(b"\xef\xbb\xbfA.\tB\xff.\n")
    with pytest.raises(DataError, match=r":1: not valid UTF-8 \(b'\\xff'\)"):
        read_pairs(p)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        read_pairs(tmp_path / "none.tsv")


def test_group_references():
    pairs = [("a", "1"), ("a", "2"), ("b", "3"), ("a", "4")]
    assert group_references(pairs) == [("a", ["1", "2"]), ("b", ["3"]), ("a", ["4"])]


def test_shared_eng_fra(eng_fra_dir):
    r = read_pairs(eng_fra_dir / "test.tsv.gz")
    assert len(r.pairs) == 2000 and r.drops.total == 0
    groups = group_references(r.pairs)
    assert sum(len(refs) for _, refs in groups) == 2000
    assert any(len(refs) > 1 for _, refs in groups)
    assert all(en and fr for en, fr in r.pairs)


def test_tatoeba_download_path(tmp_path, monkeypatch):
    """The named source end to end, with the URL pointed at a local zip of the same layout."""
    import hashlib
    import zipfile

    from attnkit.data import pairs as pairs_mod

    archive = tmp_path / "fra-eng.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("fra.txt", GOOD)
        zf.writestr("_about.txt", "about")
    monkeypatch.setattr(pairs_mod, "TATOEBA_FRA_ENG_URL", archive.as_uri())
    monkeypatch.setattr(pairs_mod, "TATOEBA_FRA_ENG_SHA256",
                        hashlib.sha256(archive.read_bytes()).hexdigest())
    path = pairs_mod.tatoeba_fra_eng(cache=tmp_path / "cache", progress=False)
    assert path == tmp_path / "cache" / "fra-eng" / "fra.txt"
    assert read_pairs(path).pairs[0] == ("Go.", "Va !")


def test_a_folder_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="is a folder, not a data file"):
        read_pairs(tmp_path)
