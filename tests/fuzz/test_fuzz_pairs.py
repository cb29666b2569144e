"""Fuzzing ``read_pairs`` (Tatoeba ``english<TAB>french``): no crash but DataError, and in a
file of good and bad lines every good line is kept and every bad line counted."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnkit.data.pairs import read_pairs
from attnkit.errors import AttnkitError

_spec = importlib.util.spec_from_file_location("fuzzlib", Path(__file__).with_name("fuzzlib.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

side = fuzz.field_text()
good_line = st.tuples(side, side, st.sampled_from(["", "\tCC-BY 2.0 (France) Attribution"]))


@st.composite
def bad_line(draw) -> tuple[str, str]:
    """``(reason, line)``: a non-blank line read_pairs must drop, and the reason it reports."""
    blank = draw(st.sampled_from(["", " ", "  \u3000"]))
    kind = draw(st.sampled_from(["without a tab", "with an empty English side",
                                 "with an empty French side"]))
    if kind == "without a tab":
        return kind, draw(side)
    if kind == "with an empty English side":
        return kind, f"{blank}\t{draw(side)}"
    return kind, f"{draw(side)}\t{blank}"


good_files = st.lists(good_line, max_size=6).map(
    lambda rows: "".join(f"{en}\t{fr}{extra}\n" for en, fr, extra in rows).encode()
)


# A corrupt deflate stream raises zlib.error, not BadGzipFile (found by this test; fixed).
ZLIB_ERROR = bytes.fromhex(
    "1f8b08000000000002033338d4607068dea105871a0e371d9af26142efaa0f13a6adfc30617d07a7"
    "019701101b1a1c6a38d478a8e950f3a15d1f26ce5e0c15866101ead9a50640000000"
)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_files), st.booleans())
@example(ZLIB_ERROR, False)
def test_arbitrary_bytes_raise_only_data_error(data, strict):
    with fuzz.temp_file(data, "pairs.tsv") as path:
        try:
            result = read_pairs(path, strict=strict)
        except AttnkitError:
            return
    assert all(en.strip() and fr.strip() for en, fr in result.pairs)


@settings(fuzz.SETTINGS)
@given(
    st.lists(st.one_of(good_line.map(lambda g: ("good", g)), bad_line().map(lambda b: ("bad", b))),
             max_size=30),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_good_lines_kept_bad_lines_counted(rows, newline, compress):
    lines, want, bad = [], [], []
    for kind, row in rows:
        if kind == "good":
            en, fr, extra = row
            lines.append(f"{en}\t{fr}{extra}")
            want.append((en.strip(), fr.strip()))
        else:
            lines.append(row[1])
            bad.append((row[0], len(lines)))
    data = "".join(line + newline for line in lines).encode("utf-8")
    if compress:
        data = gzip.compress(data, mtime=0)
    with fuzz.temp_file(data, "pairs.tsv") as path:
        result = read_pairs(path)
    assert result.pairs == want
    assert result.drops.total == len(bad)
    for entry in result.drops.reasons:
        numbers = [n for reason, n in bad if reason == entry.reason]
        assert entry.count == len(numbers)
        assert entry.examples == [f"{path}:{n}" for n in numbers[:3]]
    assert len(result.drops.format().splitlines()) == (len(result.drops.reasons) + 1 if bad else 0)
