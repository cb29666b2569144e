"""Checksummed downloads into a cache folder (`fetch`: a changed upstream file fails loudly
instead of changing results), and archive extraction that cannot escape its folder
(`safe_extract` refuses ``../x``, ``/etc/x`` or a link out before writing anything)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from attnkit.data.compressed import outside_reason, unsafe_name
from attnkit.errors import DataError, DownloadError
from attnkit.fileio import file_sha256

_CHUNK = 1 << 20
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_USER_AGENT = "Mozilla/5.0 (compatible; attnkit)"


def cache_dir() -> Path:
    """The download cache: ``$ATTNKIT_CACHE`` if set, else ``~/.cache/attnkit`` (not created)."""
    return Path(os.environ.get("ATTNKIT_CACHE") or Path.home() / ".cache" / "attnkit").expanduser()


def fetch(url: str, *, sha256: str, filename: str | None = None,
          cache: str | os.PathLike | None = None, progress: bool = True) -> Path:
    """Download ``url`` (``http(s)://`` or ``file://``) into ``cache`` (default `cache_dir`) once
    and return the path; a cached file whose checksum matches is reused offline, a download
    renamed into place only once its ``sha256`` matched (else DownloadError)."""
    expected = sha256.strip().lower()
    if not _SHA256_RE.match(expected):
        raise ValueError(f"sha256 must be 64 hex digits, got {sha256!r}")
    filename = filename or PurePosixPath(urllib.parse.urlparse(url).path).name
    if not filename or "/" in filename or "\\" in filename or filename in (".", ".."):
        raise ValueError(f"no plain file name from {url!r} (got {filename!r}); pass filename=")
    folder = Path(cache) if cache is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / filename
    if target.exists():
        if file_sha256(target) == expected:
            return target
        target.unlink()   # a stale or corrupted copy: replaced rather than failing forever
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{filename}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                # Some hosts (manythings.org among them) refuse urllib's default User-Agent.
                request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
                response = urllib.request.urlopen(request, timeout=60)  # noqa: S310
            except (OSError, ValueError) as exc:  # URLError is an OSError
                raise DownloadError(f"could not download {url}: {exc}") from exc
            total = response.headers.get("Content-Length") if response.headers else None
            with response, tqdm.wrapattr(out, "write", int(total) if total and total.isdigit()
                                         else None, desc=filename, disable=not progress) as sink:
                try:
                    shutil.copyfileobj(response, sink, _CHUNK)
                except OSError as exc:
                    raise DownloadError(f"download of {url} was interrupted: {exc}") from exc
        got = file_sha256(tmp)
        if got != expected:
            raise DownloadError(f"checksum mismatch for {url}: expected sha256 {expected}, got "
                                f"{got}; the downloaded file was deleted (a newer "
                                "upstream file? pass a local path instead)")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Extract a ``.zip`` or ``.tar[.gz]`` archive (told by its content) into ``dest``; the files,
    in archive order. A name with ``..`` or absolute, a link out of ``dest``, or a device or FIFO
    is a DataError naming the member, before anything is written."""
    archive, dest_path = Path(archive), Path(dest)
    dest_path.mkdir(parents=True, exist_ok=True)
    dest_path = dest_path.resolve()
    try:
        if zipfile.is_zipfile(archive):
            return _extract_zip(archive, dest_path)
        if tarfile.is_tarfile(archive):
            return _extract_tar(archive, dest_path)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, NotImplementedError,
            OSError) as exc:   # OSError: a bad gzip stream, a zip offset before the file start
        raise DataError(f"corrupt, truncated or unreadable archive: {exc}",
                        path=str(archive)) from exc
    raise DataError("not a zip or tar archive", path=str(archive))


def _extract_zip(archive: Path, dest: Path) -> list[Path]:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            why = outside_reason(dest, info.filename)
            if why is None and stat.S_ISLNK(info.external_attr >> 16):
                # zipfile writes a link as a file holding its target, but other unzip tools
                # make real links: one pointing out is refused all the same.
                target = zf.read(info).decode("utf-8", errors="replace")
                resolved = ((dest / info.filename.replace("\\", "/")).parent / target).resolve()
                if not target or re.match(r"^([A-Za-z]:|/)", target) \
                        or not resolved.is_relative_to(dest):
                    why = f"is a link to {target!r}, outside the destination"
            if why is not None:
                raise DataError(f"archive member {info.filename!r} {why}", path=str(archive))
        extracted = [(info, Path(zf.extract(info, dest))) for info in infos]
    return [path for info, path in extracted if not info.is_dir()]


def _extract_tar(archive: Path, dest: Path) -> list[Path]:
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        for m in members:
            # tarfile's data filter (links out of dest, devices, FIFOs) runs on every member
            # first, so nothing is written on a refusal; absolute names it strips are refused.
            try:
                tarfile.data_filter(m, str(dest))
                why = unsafe_name(m.name)
            except tarfile.FilterError as exc:
                why = f"refused: {exc}"
            if why is not None:
                raise DataError(f"archive member {m.name!r} {why}", path=str(archive))
        tf.extractall(dest, members=members, filter="data")
    return [(dest / m.name).resolve() for m in members if m.isfile()]
