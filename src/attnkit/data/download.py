"""Checksummed downloads into a cache folder, and archive extraction that cannot escape its folder.

Every dataset attnkit downloads goes through `fetch`, so every file on disk has been checked
against a SHA-256 written in the code; a changed upstream file fails loudly instead of silently
changing results. `safe_extract` refuses archives whose members would land outside the
destination ("zip slip": ``../x``, ``/etc/x``, or a link pointing outside) before writing anything.

Example:
    ```python
    path = fetch("https://example.org/data.zip", sha256="9f86d0...")
    safe_extract(path, cache_dir() / "data")
    ```
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from attnkit.data.paths import outside_reason
from attnkit.errors import DataError, DownloadError
from attnkit.fileio import file_sha256

_CHUNK = 1 << 20
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_USER_AGENT = "Mozilla/5.0 (compatible; attnkit)"


def cache_dir() -> Path:
    """The download cache: ``$ATTNKIT_CACHE`` if set, else ``~/.cache/attnkit`` (not created)."""
    env = os.environ.get("ATTNKIT_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "attnkit"


def fetch(
    url: str,
    *,
    sha256: str,
    filename: str | None = None,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
) -> Path:
    """Download ``url`` into the cache (once) and return the local path.

    A file already in the cache whose checksum matches is reused without any network access. The
    download goes to a temporary file in the cache folder and is renamed into place only after its
    checksum matched, so an interrupted or corrupted download never looks like a good file.

    Args:
        url: ``http(s)://`` or ``file://`` URL (``file://`` is how the tests exercise this code).
        sha256: expected hex SHA-256 of the file (64 hex digits).
        filename: name inside the cache; default the last component of the URL path.
        cache: cache folder; default `cache_dir`. Created if missing.
        progress: show a tqdm progress bar.

    Returns:
        Path of the verified file.

    Raises:
        DownloadError: the download failed, or the checksum did not match (the message gives the
            expected and the actual checksum; the bad file is deleted).
        ValueError: ``sha256`` is not 64 hex digits, or no file name can be derived from ``url``.
    """
    expected = sha256.strip().lower()
    if not _SHA256_RE.match(expected):
        raise ValueError(f"sha256 must be 64 hex digits, got {sha256!r}")
    if filename is None:
        filename = PurePosixPath(urllib.parse.urlparse(url).path).name
        if not filename:
            raise ValueError(f"cannot derive a file name from {url!r}; pass filename=")
    if "/" in filename or "\\" in filename or filename in (".", ".."):
        raise ValueError(f"filename must be a plain file name, got {filename!r}")
    folder = Path(cache) if cache is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / filename

    if target.exists():
        if file_sha256(target) == expected:
            return target
        # A stale or corrupted cached copy: replace it rather than fail forever.
        target.unlink()

    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{filename}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                # Some hosts (manythings.org among them) refuse urllib's default User-Agent.
                request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
                response = urllib.request.urlopen(request, timeout=60)  # noqa: S310
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DownloadError(f"could not download {url}: {exc}") from exc
            with response:
                total = response.headers.get("Content-Length") if response.headers else None
                bar = tqdm(
                    total=int(total) if total and total.isdigit() else None,
                    unit="B",
                    unit_scale=True,
                    desc=filename,
                    disable=not progress,
                )
                with bar:
                    try:
                        for block in iter(lambda: response.read(_CHUNK), b""):
                            out.write(block)
                            digest.update(block)
                            bar.update(len(block))
                    except (urllib.error.URLError, OSError) as exc:
                        raise DownloadError(f"download of {url} was interrupted: {exc}") from exc
        got = digest.hexdigest()
        if got != expected:
            raise DownloadError(
                f"checksum mismatch for {url}: expected sha256 {expected}, got {got}; the "
                "downloaded file was deleted (a newer upstream file? pass a local path instead)"
            )
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def _check_inside(dest: Path, name: str, archive: Path) -> Path:
    """Resolve ``name`` under ``dest``; DataError naming the member if it would land outside."""
    why = outside_reason(dest, name)
    if why is not None:
        raise DataError(f"archive member {name!r} {why}", path=str(archive))
    return (dest / name.replace("\\", "/")).resolve()


def _check_link(dest: Path, name: str, target: str, archive: Path, *, hard: bool) -> None:
    """A link member may only point at something inside ``dest``."""
    if not target or target.startswith("/") or re.match(r"^[A-Za-z]:", target):
        raise DataError(
            f"archive member {name!r} is a link to {target!r}, outside the destination",
            path=str(archive),
        )
    # Symlink targets are relative to the link's folder; tar hard-link targets to the archive root.
    base = dest if hard else (dest / name.replace("\\", "/")).parent
    resolved = (base / target).resolve()
    if resolved != dest and dest not in resolved.parents:
        raise DataError(
            f"archive member {name!r} is a link to {target!r}, outside the destination",
            path=str(archive),
        )


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Extract a ``.zip`` or ``.tar`` / ``.tar.gz`` / ``.tgz`` archive into ``dest``.

    Every member is checked *before* anything is written: a member with ``..`` in its path, an
    absolute path, a link (symbolic or hard) pointing outside ``dest``, or a device/FIFO member
    raises `DataError` naming the member, and nothing is extracted.

    Args:
        archive: the archive file (format detected from its content, not its name).
        dest: destination folder, created if missing.

    Returns:
        The extracted file paths (folders excluded), in archive order.

    Raises:
        DataError: unsafe member, or the file is neither a zip nor a tar archive.
    """
    archive = Path(archive)
    dest_path = Path(dest)
    dest_path.mkdir(parents=True, exist_ok=True)
    dest_path = dest_path.resolve()
    try:
        if zipfile.is_zipfile(archive):
            return _extract_zip(archive, dest_path)
        if tarfile.is_tarfile(archive):
            return _extract_tar(archive, dest_path)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, NotImplementedError) as exc:
        # gzip.BadGzipFile is an OSError subclass raised by tarfile as ReadError or directly.
        raise DataError(f"corrupt or truncated archive: {exc}", path=str(archive)) from exc
    except gzip.BadGzipFile as exc:
        raise DataError(f"corrupt gzip stream: {exc}", path=str(archive)) from exc
    except OSError as exc:
        # A zip whose member offset points before the file start makes seek() fail (EINVAL).
        raise DataError(f"cannot read or extract archive: {exc}", path=str(archive)) from exc
    raise DataError("not a zip or tar archive", path=str(archive))


def _extract_zip(archive: Path, dest: Path) -> list[Path]:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            _check_inside(dest, info.filename, archive)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                # zipfile writes links as plain files holding the target, but other unzip tools
                # create real links, so reject an outside target here as well.
                target = zf.read(info).decode("utf-8", errors="replace")
                _check_link(dest, info.filename, target, archive, hard=False)
        written = []
        for info in infos:
            out = _check_inside(dest, info.filename, archive)
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            written.append(out)
    return written


def _extract_tar(archive: Path, dest: Path) -> list[Path]:
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        for m in members:
            _check_inside(dest, m.name, archive)
            if m.issym() or m.islnk():
                _check_link(dest, m.name, m.linkname, archive, hard=m.islnk())
            elif not (m.isfile() or m.isdir()):
                raise DataError(
                    f"archive member {m.name!r} is a device or FIFO, refused", path=str(archive)
                )
        # The "data" filter (Python >= 3.12, backported to 3.8.17+) repeats these checks inside
        # tarfile itself; our own pass above is what guarantees nothing is written on rejection.
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover - old interpreters only
            tf.extractall(dest, members=members)
    return [(dest / m.name).resolve() for m in members if m.isfile()]
