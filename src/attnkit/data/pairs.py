"""Reading sentence pairs in the Tatoeba / Anki format ``english<TAB>french[<TAB>attribution]``.

Files may be ``.txt`` or ``.tsv``, plain or gzip-compressed (detected from the first bytes, not the
name). Bad lines are skipped and counted by reason (or raise under ``strict``); bytes that are
not UTF-8 always raise, naming the file and line, since they mean the wrong file or a broken
download (a skip would quietly drop every accented line of a Latin-1 file).

Example:
    ```python
    result = read_pairs("../shared/data/eng-fra/train.tsv.gz")
    result.pairs[0]          # ("He's a chain smoker.", "C'est un fumeur invétéré.")
    print(result.report())   # "" or "dropped 3 lines of FILE:\n  2 without a tab (e.g. ...)"
    refs = group_references(read_pairs(test_path).pairs)   # [(english, [french, ...]), ...]
    ```
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.data.compressed import capped_lines, decode_line, open_maybe_gzip
from attnkit.data.download import fetch, safe_extract
from attnkit.data.drops import DropReport, where
from attnkit.errors import DataError

TATOEBA_FRA_ENG_URL = "https://www.manythings.org/anki/fra-eng.zip"
TATOEBA_FRA_ENG_SHA256 = "161c93f18da3a7e6df611ed961426613260de8af06ccf8c79c977afe5135ac44"


@dataclass
class PairsResult:
    """What `read_pairs` found.

    Attributes:
        path: the file read.
        pairs: ``(english, french)`` tuples in file order, sides stripped of surrounding spaces.
        drops: the skipped lines by reason ("without a tab", "with an empty English side",
            "with an empty French side"), with the first few ``file:line`` of each.
    """

    path: Path
    pairs: list[tuple[str, str]] = field(default_factory=list)
    drops: DropReport = field(default_factory=lambda: DropReport("line"))

    @property
    def dropped(self) -> int:
        """Number of skipped lines, all reasons together."""
        return self.drops.total

    def report(self) -> str:
        """One line per reason lines were skipped (``""`` if none), e.g.:
            ```python
            dropped 3 lines of fra.txt:
              2 without a tab (e.g. fra.txt:4, fra.txt:9)
              1 with an empty French side (fra.txt:7)
            ```
        """
        return self.drops.format(str(self.path))


def read_pairs(
    path: str | os.PathLike, *, strict: bool = False, max_examples_shown: int = 3
) -> PairsResult:
    """Read ``english<TAB>french[<TAB>attribution...]`` lines.

    Args:
        path: a ``.txt`` / ``.tsv`` file, optionally gzip-compressed.
        strict: raise on the first bad line instead of skipping it.
        max_examples_shown: how many ``file:line`` places the report keeps per reason.

    Returns:
        A `PairsResult`. Blank lines are ignored (not counted); columns after the second
        (Tatoeba's attribution) are ignored; a byte-order mark opening the file is dropped.

    Raises:
        DataError: undecodable bytes (always), or a bad line under ``strict``; the message
            names the file and the 1-based line number.
    """
    path = Path(path)
    result = PairsResult(path, drops=DropReport("line", max_examples=max_examples_shown))
    with open_maybe_gzip(path) as stream:
        try:
            for number, raw in capped_lines(stream, path):
                line = decode_line(raw, path, number, number == 1).rstrip("\r\n")
                if not line.strip():
                    continue
                reason = _check_line(line)
                if reason is None:
                    english, french = line.split("\t")[:2]
                    result.pairs.append((english.strip(), french.strip()))
                elif strict:
                    raise DataError(f"line {reason} (expected english<TAB>french)",
                                    path=str(path), line=number)
                else:
                    result.drops.add(reason, where(path, number))
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DataError(f"corrupt gzip file: {exc}", path=str(path)) from exc
    return result


def _check_line(line: str) -> str | None:
    """The reason ``line`` is dropped (it reads after a count: "2 without a tab"), or None."""
    if "\t" not in line:
        return "without a tab"
    english, french = line.split("\t")[:2]
    if not english.strip():
        return "with an empty English side"
    if not french.strip():
        return "with an empty French side"
    return None


def group_references(pairs: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Group *adjacent* pairs with the same English side: ``[(english, [french, ...]), ...]``.

    Tatoeba lists alternative translations on consecutive lines; grouping them gives the
    multiple references of multi-reference BLEU. Only adjacent lines are merged, so the order
    and the count of source sentences stay those of the file.
    """
    groups: list[tuple[str, list[str]]] = []
    for english, french in pairs:
        if groups and groups[-1][0] == english:
            groups[-1][1].append(french)
        else:
            groups.append((english, [french]))
    return groups


def tatoeba_fra_eng(cache: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """Download and extract the Anki/Tatoeba English-French pairs; returns the path of ``fra.txt``.

    The checksum pins the 2019 release of ``fra-eng.zip``. manythings.org replaces the file
    in place, so a newer upstream file fails with a checksum DownloadError: download it
    yourself and pass the local ``fra.txt`` path wherever a pairs file is accepted.

    Args:
        cache: cache folder (default ``$ATTNKIT_CACHE`` or ``~/.cache/attnkit``).
        progress: show a download progress bar.
    """
    archive = fetch(
        TATOEBA_FRA_ENG_URL, sha256=TATOEBA_FRA_ENG_SHA256, cache=cache, progress=progress
    )
    dest = archive.parent / "fra-eng"
    target = dest / "fra.txt"
    if not target.exists():
        safe_extract(archive, dest)
        if not target.exists():
            raise DataError("archive has no fra.txt", path=str(archive))
    return target
