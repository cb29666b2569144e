"""Reading sentence pairs in the Tatoeba / Anki format ``english<TAB>french[<TAB>attribution]``.

Files may be ``.txt`` or ``.tsv``, plain or gzip (told by content). Bad lines are skipped and
counted by reason (or raise under ``strict``); bytes that are not UTF-8 always raise, naming
file and line: they mean the wrong file, and a skip would drop every accented line."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.data.compressed import CORRUPT_STREAM, capped_lines, decode_line, open_maybe_gzip
from attnkit.data.download import fetch, safe_extract
from attnkit.data.drops import DropReport, where
from attnkit.errors import DataError

TATOEBA_FRA_ENG_URL = "https://www.manythings.org/anki/fra-eng.zip"
TATOEBA_FRA_ENG_SHA256 = "161c93f18da3a7e6df611ed961426613260de8af06ccf8c79c977afe5135ac44"


@dataclass
class PairsResult:
    """What `read_pairs` found: the ``(english, french)`` pairs in order (sides stripped), and the
    skipped lines by reason with the first few ``file:line`` of each (``drops``)."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    drops: DropReport = field(default_factory=lambda: DropReport("line"))


def read_pairs(path: str | os.PathLike, *, strict: bool = False) -> PairsResult:
    """Read ``english<TAB>french[<TAB>attribution...]`` lines (blanks, extra columns ignored).

    Raises:
        DataError: undecodable bytes (always), or the first bad line under ``strict``.
    """
    path = Path(path)
    result = PairsResult()
    with open_maybe_gzip(path) as stream:
        try:
            for number, raw in capped_lines(stream, path):
                line = decode_line(raw, path, number, number == 1).rstrip("\r\n")
                if not line.strip():
                    continue
                english, french = [*line.split("\t"), ""][:2]
                reason = ("without a tab" if "\t" not in line
                          else "with an empty English side" if not english.strip()
                          else "with an empty French side" if not french.strip() else None)
                if reason is None:
                    result.pairs.append((english.strip(), french.strip()))
                elif strict:
                    raise DataError(f"line {reason} (expected english<TAB>french)",
                                    path=str(path), line=number)
                else:
                    result.drops.add(reason, where(path, number))
        except CORRUPT_STREAM as exc:
            raise DataError(f"corrupt gzip file: {exc}", path=str(path)) from exc
    return result


def group_references(pairs: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Group *adjacent* pairs with the same English side: ``[(english, [french, ...]), ...]``, the
    references of multi-reference BLEU (Tatoeba lists alternatives on consecutive lines)."""
    groups: list[tuple[str, list[str]]] = []
    for english, french in pairs:
        if groups and groups[-1][0] == english:
            groups[-1][1].append(french)
        else:
            groups.append((english, [french]))
    return groups


def tatoeba_fra_eng(cache: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """Download and extract the Anki/Tatoeba English-French pairs into ``cache``; the path of
    ``fra.txt``. The checksum pins the 2019 ``fra-eng.zip``: a newer upstream file fails with a
    DownloadError (download it yourself and pass the local ``fra.txt``)."""
    archive = fetch(TATOEBA_FRA_ENG_URL, sha256=TATOEBA_FRA_ENG_SHA256, cache=cache,
                    progress=progress)
    dest = archive.parent / "fra-eng"
    target = dest / "fra.txt"
    if not target.exists():
        safe_extract(archive, dest)
        if not target.exists():
            raise DataError("archive has no fra.txt", path=str(archive))
    return target
