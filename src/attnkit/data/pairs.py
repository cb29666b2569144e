"""Reading sentence pairs in the Tatoeba / Anki format ``english<TAB>french[<TAB>attribution]``.

Files may be ``.txt`` or ``.tsv``, plain or gzip-compressed (detected from the first bytes, not the
name). Bad lines are skipped and counted (or raise under ``strict``); bytes that are not UTF-8
always raise, naming the file and line, since they mean the wrong file or a broken download.

Example::

    result = read_pairs("../shared/data/eng-fra/train.tsv.gz")
    result.pairs[0]          # ("He's a chain smoker.", "C'est un fumeur invétéré.")
    result.dropped, result.problems[:2]
    refs = group_references(read_pairs(test_path).pairs)   # [(english, [french, ...]), ...]
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.data.download import fetch, safe_extract
from attnkit.errors import DataError

_GZIP_MAGIC = b"\x1f\x8b"

TATOEBA_FRA_ENG_URL = "https://www.manythings.org/anki/fra-eng.zip"
TATOEBA_FRA_ENG_SHA256 = "161c93f18da3a7e6df611ed961426613260de8af06ccf8c79c977afe5135ac44"


@dataclass
class PairsResult:
    """What :func:`read_pairs` found.

    Attributes:
        pairs: ``(english, french)`` tuples in file order, sides stripped of surrounding spaces.
        dropped: number of skipped lines (no tab, or an empty side).
        problems: the first few skipped lines as ``"path:line: reason"`` strings.
    """

    pairs: list[tuple[str, str]] = field(default_factory=list)
    dropped: int = 0
    problems: list[str] = field(default_factory=list)


def _open_bytes(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == _GZIP_MAGIC else open(path, "rb")


def read_pairs(
    path: str | os.PathLike, *, strict: bool = False, max_examples_shown: int = 5
) -> PairsResult:
    """Read ``english<TAB>french[<TAB>attribution...]`` lines.

    Args:
        path: a ``.txt`` / ``.tsv`` file, optionally gzip-compressed.
        strict: raise on the first bad line instead of skipping it.
        max_examples_shown: how many skipped lines :attr:`PairsResult.problems` keeps.

    Returns:
        A :class:`PairsResult`. Blank lines are ignored (not counted); columns after the second
        (Tatoeba's attribution) are ignored.

    Raises:
        DataError: undecodable bytes (always), or a bad line under ``strict``; the message
            names the file and the 1-based line number.
    """
    path = Path(path)
    result = PairsResult()
    try:
        stream = _open_bytes(path)
    except FileNotFoundError as exc:
        raise DataError("file not found", path=str(path)) from exc
    with stream:
        try:
            for number, raw in enumerate(stream, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})",
                        path=str(path),
                        line=number,
                    ) from exc
                if number == 1:
                    line = line.removeprefix("\ufeff")  # BOM left by some editors
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                reason = _check_line(line)
                if reason is None:
                    english, french = line.split("\t")[:2]
                    result.pairs.append((english.strip(), french.strip()))
                    continue
                if strict:
                    raise DataError(reason, path=str(path), line=number)
                result.dropped += 1
                if len(result.problems) < max_examples_shown:
                    result.problems.append(f"{path}:{number}: {reason}")
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DataError(f"corrupt gzip file: {exc}", path=str(path)) from exc
    return result


def _check_line(line: str) -> str | None:
    if "\t" not in line:
        return "no tab between the English and the French side"
    english, french = line.split("\t")[:2]
    if not english.strip():
        return "empty English side"
    if not french.strip():
        return "empty French side"
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
