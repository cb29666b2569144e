"""Shared settings and byte-mangling strategies of the reader fuzz tests.

Test modules load this file by path (pytest runs with ``--import-mode=importlib``, so the
tests folder is not importable)::

    here = Path(__file__).with_name("fuzzlib.py")
    _spec = importlib.util.spec_from_file_location("fuzzlib", here)
    fuzz = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fuzz)

    @settings(fuzz.SETTINGS)
    @given(fuzz.any_bytes(good_files))

Hypothesis runs many examples in one call of the test function, so a function-scoped
``tmp_path`` would be shared between them: tests write through :func:`temp_file` instead.

The suite runs a fixed set of examples (``derandomize``) so that CI is repeatable; set
``ATTNKIT_FUZZ_EXAMPLES=2000`` to search longer with fresh random examples on each run.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

_LONG = os.environ.get("ATTNKIT_FUZZ_EXAMPLES")

SETTINGS = settings(
    max_examples=int(_LONG) if _LONG else 50,
    deadline=None,
    derandomize=not _LONG,
    database=None,
    # No shrinking: a failing example is printed as found, in seconds instead of minutes.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Characters that end a line for one reader or another; line-based strategies avoid them.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def mangle(good: bytes, draw) -> bytes:
    """Corrupt ``good``: truncate it, flip some bytes or splice in junk (one of the three).

    ``draw`` is the draw function of an ``st.composite`` strategy or ``data.draw``.
    """
    how = draw(st.sampled_from(["truncate", "flip", "splice"]))
    if not good:
        return draw(st.binary(max_size=64))
    at = draw(st.integers(0, len(good) - 1))
    if how == "truncate":
        return good[:at]
    if how == "flip":
        out = bytearray(good)
        for i in draw(st.lists(st.integers(at, len(good) - 1), min_size=1, max_size=4)):
            out[i] ^= draw(st.integers(1, 255))
        return bytes(out)
    return good[:at] + draw(st.binary(min_size=1, max_size=32)) + good[at:]


def any_bytes(good: st.SearchStrategy[bytes], *, gzip_too: bool = True
              ) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, plus the near-misses that matter more: good files truncated,
    bit-flipped or spliced, and (``gzip_too``) the same for gzip-compressed good files and
    junk behind a gzip magic number."""

    @st.composite
    def near_miss(draw):
        content = draw(good)
        if gzip_too and draw(st.booleans()):
            content = gzip.compress(content, mtime=0)
        return mangle(content, draw)

    options = [st.binary(max_size=512), near_miss()]
    if gzip_too:
        options.append(st.binary(max_size=256).map(lambda b: b"\x1f\x8b" + b))
    return st.one_of(options)


def field_text(extra_excluded: str = "", max_size: int = 12) -> st.SearchStrategy[str]:
    """Non-blank text of one field of a line-based file: any Unicode but line breaks, tabs,
    surrogates (not encodable) and the BOM (readers strip it), plus ``extra_excluded``."""
    alphabet = st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters=LINE_BREAKS + "\t\ufeff" + extra_excluded,
    )
    return st.text(alphabet, min_size=1, max_size=max_size).filter(lambda s: s.strip() != "")


@contextmanager
def temp_file(data: bytes, name: str = "data") -> Iterator[Path]:
    """``data`` written to a fresh temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="attnkit-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        yield path


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8,
)
"""Any JSON value (what a hand-edited or foreign file may hold where a reader expects another)."""
