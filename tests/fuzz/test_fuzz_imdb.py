"""Fuzzing the IMDB readers (JSON Lines, CSV, the aclImdb tar archive): arbitrary bytes raise
nothing but DataError, and with ``skip_bad=True`` every good record of a partly bad file is
kept (in order) and every bad one counted in ``ReadStats.drops``.

Crashes this fuzzing found (corrupt gzip streams, non-tar bytes, unhashable labels) are fixed;
the examples that found them stay as ``@example``s.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import json
import tarfile
import zlib
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnkit.data.imdb import ReadStats, Review, load_split
from attnkit.errors import AttnkitError

_spec = importlib.util.spec_from_file_location("fuzzlib", Path(__file__).with_name("fuzzlib.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

# Review text: any encodable Unicode (the writers below quote or escape what needs it).
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\ue000"),
               min_size=1, max_size=40).filter(lambda s: s.strip() != "")
good_label = st.sampled_from([(0, 0), (1, 1), ("0", 0), ("1", 1), ("neg", 0), ("pos", 1),
                              (" POS ", 1), ("Neg", 0)])  # (as written, as read)
bad_label = st.sampled_from([2, -1, "2", "", "positive", True, None, 0.5])
blank_text = st.sampled_from(["", " ", "\n\t "])

# What a corrupt gzip stream raises (BadGzipFile is an OSError) when a reader does not catch it.
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)
_GOOD_RECORDS = [{"text": "Great film.", "label": 1}, {"text": "Dull.", "label": "neg"}] * 20
TRUNCATED_GZIP = gzip.compress("".join(json.dumps(r) + "\n" for r in _GOOD_RECORDS).encode(),
                                mtime=0)[:-12]


def _never_crashes(reader, data: bytes, name: str, **kwargs) -> None:
    for skip_bad in (False, True):
        with fuzz.temp_file(data, name) as path:
            try:
                reviews = reader(path, "train", skip_bad=skip_bad, **kwargs)
            except AttnkitError:
                continue
        assert all(isinstance(r.text, str) and r.label in (0, 1) for r in reviews)


def _read_skipping(reader, data: bytes, name: str) -> tuple[list[Review], ReadStats]:
    stats = ReadStats()
    with fuzz.temp_file(data, name) as path:
        return reader(path, "train", skip_bad=True, stats=stats), stats


# ---------------------------------------------------------------- JSON Lines
def _jsonl(records: list) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


good_jsonl = st.lists(st.builds(lambda t, lab: {"text": t, "label": lab[0]}, text, good_label),
                      max_size=5).map(_jsonl)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_jsonl, gzip_too=False))
def test_jsonl_arbitrary_bytes_raise_only_data_error(data):
    _never_crashes(load_split, data, "reviews.jsonl")


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_jsonl))
@example(TRUNCATED_GZIP)
def test_jsonl_corrupt_gzip_raises_only_data_error(data):
    _never_crashes(load_split, data, "reviews.jsonl.gz")


@settings(fuzz.SETTINGS)
@given(st.lists(st.one_of(fuzz.json_values,
                          st.fixed_dictionaries({"text": fuzz.json_values,
                                                 "label": fuzz.json_values})), max_size=4))
@example([{"text": "Fine.", "label": [1]}])
def test_jsonl_any_json_values_raise_only_data_error(records):
    _never_crashes(load_split, _jsonl(records), "reviews.jsonl")


@st.composite
def bad_jsonl_line(draw) -> bytes:
    """A non-blank line a JSON Lines reader must skip, with every reason it knows."""
    t = draw(text)
    kind = draw(st.sampled_from(["not json", "not object", "no text", "no label", "bad label",
                                 "blank text", "text not str", "bad utf-8"]))
    record = {
        "not object": [t, 1],
        "no text": {"label": 1},
        "no label": {"text": t},
        "bad label": {"text": t, "label": draw(bad_label)},
        "blank text": {"text": draw(blank_text), "label": 1},
        "text not str": {"text": 5, "label": 1},
    }.get(kind)
    if kind == "not json":
        return b'{"text": ' + json.dumps(t).encode()  # cut short
    if kind == "bad utf-8":
        return b'{"text": "caf\xe9", "label": 1}'  # Latin-1, not UTF-8
    return json.dumps(record).encode()


@settings(fuzz.SETTINGS)
@given(st.lists(st.one_of(st.tuples(st.just("good"), text, good_label),
                          st.tuples(st.just("bad"), bad_jsonl_line())), max_size=25),
       st.booleans(), st.sampled_from([b"", b"\xef\xbb\xbf"]))
def test_jsonl_good_lines_kept_bad_lines_counted(rows, compress, bom):
    lines, want = [], []
    for kind, *row in rows:
        if kind == "good":
            t, (written, label) = row
            lines.append(json.dumps({"text": t, "label": written, "id": len(lines)}).encode())
            want.append(Review(t, label))
        else:
            lines.append(row[0])
    data = bom + b"".join(line + b"\n" for line in lines)
    if compress:
        data = gzip.compress(data, mtime=0)
    reviews, stats = _read_skipping(load_split, data, "reviews.jsonl.gz")
    assert reviews == want
    assert (stats.read, stats.drops.total) == (len(want), len(rows) - len(want))


# ---------------------------------------------------------------- CSV
def _csv(rows: list[list]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(["id", "text", "label"])
    writer.writerows(rows)
    return out.getvalue().encode()


good_csv = st.lists(st.builds(lambda t, lab: [0, t, lab[0]], text, good_label),
                    max_size=5).map(_csv)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_csv, gzip_too=False))
def test_csv_arbitrary_bytes_raise_only_data_error(data):
    _never_crashes(load_split, data, "reviews.csv")


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_csv))
@example(gzip.compress(_csv([[i, "Good film.", "pos"] for i in range(40)]), mtime=0)[:-12])
def test_csv_corrupt_gzip_raises_only_data_error(data):
    _never_crashes(load_split, data, "reviews.csv.gz")


# Stands for one byte that is not UTF-8 (Latin-1 e-acute) in a CSV record; texts never hold it.
NOT_UTF8 = "\ue000"
BAD_BYTE = b"\xe9"


@settings(fuzz.SETTINGS)
@given(st.lists(st.one_of(st.tuples(st.just("good"), text, good_label),
                          st.tuples(st.just("bad"), blank_text, good_label),
                          st.tuples(st.just("bad"), text, bad_label),
                          st.tuples(st.just("bad"), text.map(lambda t: t + NOT_UTF8),
                                    good_label)), max_size=25),
       st.sampled_from([b"", b"\xef\xbb\xbf"]))
def test_csv_good_rows_kept_bad_rows_counted(rows, bom):
    # Texts hold commas, quotes and line breaks: the writer quotes them, one record spans lines.
    # A bad byte costs its own record only, wherever it is.
    body = [[i, t, lab[0] if kind == "good" or isinstance(lab, tuple) else lab]
            for i, (kind, t, lab) in enumerate(rows)]
    want = [Review(t, lab[1]) for kind, t, lab in rows if kind == "good"]
    data = bom + _csv(body).replace(NOT_UTF8.encode(), BAD_BYTE)
    reviews, stats = _read_skipping(load_split, data, "reviews.csv")
    assert reviews == want
    assert (stats.read, stats.drops.total) == (len(want), len(rows) - len(want))


# ---------------------------------------------------------------- tar archive
def _tar(members: list[tuple[str, bytes]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


good_tar = st.lists(st.builds(lambda t, lab: (f"aclImdb/train/{lab}/1_7.txt", t.encode()),
                              text, st.sampled_from(["pos", "neg"])), max_size=4).map(_tar)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_tar, gzip_too=False))
@example(b"this is not a tar archive")
def test_tar_arbitrary_bytes_raise_only_data_error(data):
    _never_crashes(load_split, data, "aclImdb_v1.tar.gz")


@st.composite
def tar_member(draw) -> tuple[str, str, bytes, int | None]:
    """``(kind, name, payload, label)``: kind good / bad (skipped and counted) / other
    (ignored: another split, ``unsup``, not a review)."""
    t = draw(text).encode()
    lab = draw(st.sampled_from(["pos", "neg"]))
    i = draw(st.integers(0, 99))
    return draw(st.sampled_from([
        ("good", f"aclImdb/train/{lab}/{i}_7.txt", t, 1 if lab == "pos" else 0),
        ("bad", f"aclImdb/train/{lab}/{i}_1.txt", b" \n", None),          # empty review
        ("bad", f"aclImdb/train/{lab}/{i}_2.txt", b"caf\xe9", None),      # not UTF-8
        ("bad", f"../aclImdb/train/{lab}/{i}_3.txt", t, None),            # escapes the folder
        ("bad", f"/aclImdb/train/{lab}/{i}_4.txt", t, None),              # absolute
        ("other", f"aclImdb/test/{lab}/{i}_7.txt", t, None),
        ("other", f"aclImdb/train/unsup/{i}_0.txt", t, None),
        ("other", "aclImdb/README", t, None),
    ]))


@settings(fuzz.SETTINGS)
@given(st.lists(tar_member(), max_size=12), st.sampled_from(["w:gz", "w"]))
def test_tar_good_members_kept_bad_members_counted(members, mode):
    data = _tar([(name, payload) for _, name, payload, _ in members], mode)
    want = [Review(p.decode(), lab) for kind, _, p, lab in members if kind == "good"]
    reviews, stats = _read_skipping(load_split, data, "aclImdb_v1.tar.gz")
    assert reviews == want
    assert (stats.read, stats.drops.total) == (len(want), sum(m[0] == "bad" for m in members))
