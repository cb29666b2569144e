"""An export's manifest: the size and sha256 of every file, written last and checked first.

A CTranslate2 folder is loaded by a C++ library that trusts its bytes: `check_manifest`
refuses any file that differs from what the export wrote, `check_ct2_vocabulary` a
vocabulary that is not the run's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.errors import CheckpointError
from attnkit.fileio import (
    MAX_VOCAB_BYTES,
    checked_file,
    file_sha256,
    read_json_object,
    write_json,
)

MANIFEST = "manifest.json"
# CTranslate2's vocabulary files: one shared file, or one per side.
CT2_VOCABULARIES = {"shared_vocabulary.json": ("src", "tgt"),
                    "source_vocabulary.json": ("src",), "target_vocabulary.json": ("tgt",)}


def write_manifest(folder: Path) -> Path:
    """``folder/manifest.json``: ``{"format": 1, "files": {name: {"bytes", "sha256"}}}`` of
    every file in ``folder`` (sub-folders included)."""
    files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    return write_json(folder / MANIFEST, {"format": 1, "files": files})


def check_manifest(folder: Path) -> None:
    """Check every file the manifest lists (present, same size, same sha256); an export without
    a manifest loads with a note. CheckpointError: a missing or changed file, a broken manifest.
    """
    if not (folder / MANIFEST).exists():
        print(f"attnkit: note: {folder} has no {MANIFEST} (an older export): its files cannot "
              "be checked; export the run again to get one", file=sys.stderr)
        return
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


def check_ct2_vocabulary(folder: Path, src: Sequence[str], tgt: Sequence[str],
                         model_config: Any) -> None:
    """CheckpointError unless CTranslate2's vocabulary files list the run's tokens, in order."""
    sides = {"src": list(src), "tgt": list(tgt)}
    sizes = {"src": model_config.src_vocab, "tgt": model_config.tgt_vocab}
    found = [name for name in CT2_VOCABULARIES if (folder / name).exists()]
    if not found:
        raise CheckpointError(f"{folder}: no CTranslate2 vocabulary file "
                              f"({' or '.join(CT2_VOCABULARIES)})")
    for name in found:
        path = checked_file(folder / name, "CTranslate2's vocabulary", root=folder,
                            limit=MAX_VOCAB_BYTES)
        try:
            tokens = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{path}: not a vocabulary file ({exc})") from None
        for side in CT2_VOCABULARIES[name]:
            if tokens != sides[side] or len(tokens) != sizes[side]:
                raise CheckpointError(
                    f"{path}: {len(tokens) if isinstance(tokens, list) else '?'} tokens that "
                    f"are not the model's vocabulary ({sizes[side]} tokens); export the run "
                    "again")
