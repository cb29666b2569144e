"""An export's manifest: the size and sha256 of every file, written last and checked first.

A CTranslate2 folder is loaded by a C++ library that trusts its bytes: `check_manifest`
refuses any file that differs from what the export wrote (its vocabularies included).
"""

from __future__ import annotations

from pathlib import Path

from attnkit.errors import CheckpointError
from attnkit.fileio import checked_file, file_sha256, read_json_object, write_json

MANIFEST = "manifest.json"


def write_manifest(folder: Path) -> Path:
    """``folder/manifest.json``: ``{"format": 1, "files": {name: {"bytes", "sha256"}}}`` of
    every file in ``folder`` (sub-folders included)."""
    files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    return write_json(folder / MANIFEST, {"format": 1, "files": files})


def check_manifest(folder: Path) -> None:
    """Check every file the manifest lists (present, same size, same sha256). CheckpointError: no
    manifest, a missing or changed file, a broken manifest."""
    if not (folder / MANIFEST).exists():
        raise CheckpointError(f"{folder}: no {MANIFEST}, so its files cannot be checked; export "
                              "the run again")
    manifest = read_json_object(folder / MANIFEST, "the export's manifest", root=folder)
    files = manifest.get("files")
    if manifest.get("format") != 1 or not isinstance(files, dict) or not files:
        raise CheckpointError(f"{folder / MANIFEST}: not a manifest attnkit wrote")
    for name, want in sorted(files.items()):
        if not isinstance(want, dict) or "/.." in f"/{name}" or name.startswith("/"):
            raise CheckpointError(f"{folder / MANIFEST}: a bad entry {name!r}")
        path = checked_file(folder / name, "a file of the export", root=folder, limit=None)
        if path.stat().st_size != want.get("bytes") or file_sha256(path) != want.get("sha256"):
            raise CheckpointError(f"{path}: changed since the export (its size or sha256 is not "
                                  f"the manifest's); export the run again")
