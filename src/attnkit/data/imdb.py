"""IMDB movie reviews (Maas et al., 2011) from every form they come in: an ``aclImdb/`` folder,
the official ``aclImdb_v1.tar.gz`` read member by member (``"download"`` fetches it), JSON
Lines (maybe gzip) of ``{"text", "label"}``, or CSV with a text and a label column;
`load_split` picks by path. Labels are ``0``/``1`` or ``"neg"``/``"pos"``. A bad record raises
a `DataError` naming its file and line (or member), or with ``skip_bad`` is counted by reason
in `ReadStats`; one bad byte costs that record only. Sources: docs/concepts.md, "Data"."""

from __future__ import annotations

import csv
import io
import os
import random
import re
import stat
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from attnkit.data import compressed
from attnkit.data.download import fetch
from attnkit.data.drops import BadRecord, DropReport, parse_json
from attnkit.errors import DataError

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
# The published checksum (as pinned by TensorFlow Datasets and others).
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
SPLITS = ("train", "test")
_TAR = (".tar.gz", ".tgz", ".tar")
_LABELS = {0: 0, 1: 1, "0": 0, "1": 1, "neg": 0, "pos": 1}
# csv.field_size_limit takes a C long (32 bits on Windows).
_C_LONG_MAX = 2**31 - 1
# What surrogateescape decodes an invalid UTF-8 byte to.
_UNDECODED = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class Review:
    """One labelled review: ``label`` 1 = positive, 0 = negative."""

    text: str
    label: int


@dataclass
class ReadStats:
    """What a reader did: records ``read``, and the skipped ones by reason (``drops``)."""

    read: int = 0
    drops: DropReport = field(default_factory=DropReport)


def _review(text, label, *, path: str, line: int | None) -> Review:
    """A Review, or a BadRecord: a text that is not a string or is blank, a label other than
    ``0``/``1``/``"0"``/``"1"``/``"neg"``/``"pos"``."""
    if not isinstance(text, str):
        raise BadRecord("with a text that is not a string",
                        f"text must be a string, got {type(text).__name__}", path=path, line=line)
    if not text.strip():
        raise BadRecord("with an empty review", "empty review", path=path, line=line)
    key = label.strip().lower() if isinstance(label, str) else label
    if not isinstance(key, (int, str)) or isinstance(key, bool) or key not in _LABELS:
        raise BadRecord("with a label other than 0, 1, neg or pos",
                        f"label must be 0, 1, 'neg' or 'pos', got {label!r}", path=path, line=line)
    return Review(text, _LABELS[key])


def _review_file(f, where: str, label: int) -> Review:
    """The review in an open file (folder or tar member): at most `MAX_LINE_BYTES`, UTF-8
    (a byte-order mark may open it), not blank."""
    data = f.read(compressed.MAX_LINE_BYTES + 1)
    if len(data) > compressed.MAX_LINE_BYTES:
        raise BadRecord("longer than a review can be",
                        f"more than {compressed.MAX_LINE_BYTES:,} bytes: not a review", path=where)
    return _review(compressed.decode_line(data, where, None, True), label, path=where, line=None)


def _collect(records: Iterator, name, stats: ReadStats | None, skip_bad: bool) -> list[Review]:
    """Drain a generator of Reviews / DataErrors, raising or skipping the errors; refused once
    the texts pass `MAX_DATA_BYTES` together (a folder or an archive of many files)."""
    out: list[Review] = []
    stats, total = stats or ReadStats(), 0
    for item in records:
        if isinstance(item, DataError):
            if not skip_bad:
                raise item
            stats.drops.add_error(item)
            continue
        total += len(item.text)
        if total > compressed.MAX_DATA_BYTES:
            raise DataError(compressed.too_much_data(), path=str(name))
        out.append(item)
        stats.read += 1
    return out


def _jsonl_records(path: Path) -> Iterator:
    name = str(path)
    try:
        with compressed.open_maybe_gzip(path) as f:
            for lineno, raw in compressed.capped_lines(f, name):
                try:
                    text = compressed.decode_line(raw, name, lineno, lineno == 1)
                    if not text.strip():  # a blank line, or a byte-order mark alone
                        continue
                    obj = parse_json(text, path=name, line=lineno)
                    if not isinstance(obj, dict):
                        raise BadRecord("not a JSON object",
                                        "expected a JSON object {\"text\", \"label\"}",
                                        path=name, line=lineno)
                    for key in ("text", "label"):
                        if key not in obj:
                            raise BadRecord("without a 'text' or a 'label' field",
                                            f"missing field {key!r} (need \"text\" and "
                                            "\"label\")", path=name, line=lineno)
                    yield _review(obj["text"], obj["label"], path=name, line=lineno)
                except DataError as exc:
                    yield exc
    except compressed.CORRUPT_STREAM as exc:
        yield DataError(f"corrupt or truncated compressed file ({exc})", path=name)


def _csv_records(path: Path, text_column: str, label_column: str) -> Iterator:
    name = str(path)
    with compressed.open_maybe_gzip(path) as fb:
        try:
            data = compressed.read_data_stream(fb, name)
        except compressed.CORRUPT_STREAM as exc:
            yield DataError(f"corrupt or truncated compressed file ({exc})", path=name)
            return
    # Each undecodable byte becomes a lone surrogate, which valid UTF-8 never decodes to: the
    # record that holds one is refused on its own line and the records around it are kept.
    content = data.decode("utf-8-sig", errors="surrogateescape")
    try:
        header, rows = _parse_csv(content)
    except csv.Error as exc:
        yield DataError(f"unreadable CSV header ({exc})", path=name, line=1)
        return
    for col in (text_column, label_column):
        if col not in header:
            yield DataError(f"no column {col!r} in header {header}", path=name, line=1)
            return
    for lineno, row in rows:
        if isinstance(row, csv.Error):
            yield BadRecord("with bad CSV syntax", f"bad CSV record ({row})", path=name,
                            line=lineno)
            continue
        try:
            _check_utf8(row.values(), path=name, line=lineno)
            yield _review(row[text_column] or "", row[label_column], path=name, line=lineno)
        except DataError as exc:
            yield exc


def _parse_csv(content: str) -> tuple[list[str], list[tuple[int, dict | csv.Error]]]:
    """The header and every ``(line, row or csv.Error)``; ``line`` is where the record ends. csv's
    module-wide 128 KiB field limit is raised for this parse only (a review may be the file)."""
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, min(len(content) + 1, _C_LONG_MAX)))
    try:
        reader = csv.DictReader(io.StringIO(content, newline=""))
        header = reader.fieldnames or []
        rows: list[tuple[int, dict | csv.Error]] = []
        while True:
            try:
                row: dict | csv.Error = next(reader)
            except StopIteration:
                return list(header), rows
            except csv.Error as exc:  # the reader starts afresh on the next line
                row = exc
            rows.append((reader.line_num, row))
    finally:
        csv.field_size_limit(previous)


def _check_utf8(values, *, path: str, line: int) -> None:
    """BadRecord if a field of a row holds an undecoded byte (see `_csv_records`)."""
    texts = [t for v in values for t in (v if isinstance(v, list) else [v]) if isinstance(t, str)]
    bad = _UNDECODED.search("".join(texts))
    if bad:
        byte = ord(bad.group()) - 0xDC00
        raise BadRecord("not valid UTF-8", f"not valid UTF-8 (byte 0x{byte:02x})", path=path,
                        line=line)


def _folder_records(root: Path, split: str) -> Iterator:
    base = root.resolve()
    for label_name in ("neg", "pos"):
        folder = root / split / label_name
        if not folder.is_dir():
            yield DataError(f"missing folder {split}/{label_name}", path=str(root))
            continue
        why = compressed.outside_reason(base, f"{split}/{label_name}")
        if why is not None:  # a symbolic link out of the data folder: not followed
            yield BadRecord("outside the data folder", f"folder {why}", path=str(folder))
            continue
        for file in sorted(folder.glob("*.txt")):
            why = compressed.outside_reason(base, f"{split}/{label_name}/{file.name}")
            try:
                if why is not None:
                    raise BadRecord("outside the data folder", f"file {why}", path=str(file))
                try:
                    # Opened without blocking: a named pipe called x.txt would wait for a writer.
                    with open(os.open(file, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # /dev/zero as x.txt
                            raise BadRecord("unreadable", "not a regular file (a device, pipe "
                                            "or socket)", path=str(file))
                        yield _review_file(f, str(file), _LABELS[label_name])
                except OSError as exc:  # a folder named *.txt, a dangling link, no permission
                    raise BadRecord("unreadable", f"cannot read: {exc.strerror or exc}",
                                    path=str(file)) from None
            except DataError as exc:
                yield exc


def _tar_records(archive: Path, split: str) -> Iterator:
    name = str(archive)
    try:
        with tarfile.open(archive, "r:*") as tar:   # a regular file (`load_split`)
            for member in tar:
                why = compressed.unsafe_name(member.name)
                if why is not None:
                    yield BadRecord("with an unsafe member name",
                                    f"unsafe member name {member.name!r} ({why})", path=name)
                    continue
                parts = PurePosixPath(member.name).parts
                # aclImdb/<split>/<pos|neg>/<id>_<rating>.txt
                if len(parts) == 4 and parts[1] == split and parts[2] in ("pos", "neg") \
                        and parts[3].endswith(".txt") and member.isfile():
                    try:
                        yield _review_file(tar.extractfile(member), f"{name}[{member.name}]",
                                           _LABELS[parts[2]])
                    except DataError as exc:
                        yield exc
    except (tarfile.TarError, *compressed.CORRUPT_STREAM, OSError) as exc:
        yield DataError(f"corrupt, truncated or not a tar archive ({exc})", path=name)


def _split_in(folder: Path, split: str) -> Path | None:
    """The ``<split>.jsonl[.gz]`` / ``<split>.csv`` file or the aclImdb root in ``folder``."""
    for ext in (".jsonl.gz", ".jsonl", ".csv"):
        if (folder / f"{split}{ext}").is_file():
            return folder / f"{split}{ext}"
    return next((r for r in (folder, folder / "aclImdb") if (r / split).is_dir()), None)


def load_split(path, split: str, *, skip_bad: bool = False, stats: ReadStats | None = None,
               text_column: str = "text", label_column: str = "label") -> list[Review]:
    """Reviews of ``split`` from whatever ``path`` is: a folder with ``<split>.jsonl[.gz]`` or
    ``<split>.csv``; an ``aclImdb`` folder (or its parent: neg first, files in name order);
    ``*.tar.gz``; one JSON Lines (the default) or ``.csv`` file (whatever ``split`` is, its
    header naming ``text_column`` and ``label_column``); or ``"download"`` (the official
    archive, fetched into the cache once, checksummed; members are read from it, nothing
    extracted)."""
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    path = fetch(IMDB_URL, sha256=IMDB_SHA256, filename="aclImdb_v1.tar.gz") \
        if str(path) == "download" else Path(path)
    if path.is_dir():
        found = _split_in(path, split)
        if found is None:
            raise DataError(f"no {split}.jsonl.gz, {split}.jsonl, {split}.csv or "
                            f"aclImdb/{split}/ in this folder", path=str(path))
        path = found
    if path.is_dir():
        records = _folder_records(path, split)
    elif compressed.data_file(path).name.endswith(_TAR):
        records = _tar_records(path, split)
    elif ".csv" in [s.lower() for s in path.suffixes]:
        records = _csv_records(path, text_column, label_column)
    else:
        records = _jsonl_records(path)
    return _collect(records, path, stats, skip_bad)


def has_split(path, split: str) -> bool:
    """Whether `load_split` would find a separate ``split`` at ``path`` (not one file)."""
    path = Path(path)
    return str(path) == "download" or path.name.endswith(_TAR) \
        or (path.is_dir() and _split_in(path, split) is not None)


def split_validation(items: Sequence, fraction: float, seed: int) -> tuple[list, list]:
    """``(train, valid)`` carved from ``items``, ``round(len * fraction)`` in ``valid``, both in
    their original order; the same ``(fraction, seed)`` gives the same split."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"validation fraction must be in [0, 1), got {fraction}")
    n_valid = int(round(len(items) * fraction))
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    valid_idx = set(order[:n_valid])
    train = [x for i, x in enumerate(items) if i not in valid_idx]
    valid = [x for i, x in enumerate(items) if i in valid_idx]
    return train, valid
