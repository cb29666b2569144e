"""Where a translation run's sentence pairs come from, and its train/valid/test splits.

`data_spec` turns ``data`` (``"synthetic"``, ``"tatoeba"``, a folder of ``train``/``valid``/
``test`` files, or one pairs file) into a small JSON description kept in the run's
``config.json``; `load_splits` turns it back into the same pairs. A 96/2/2 split groups the
pairs by English sentence, so none is in two splits (docs/concepts.md, "Data")."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attnkit.data.compressed import data_file
from attnkit.data.pairs import read_pairs, tatoeba_fra_eng
from attnkit.data.synthetic_fr import synthetic_splits
from attnkit.errors import DataError

Pair = tuple[str, str]
Log = Callable[[str], None]
SYNTHETIC_SIZES = {"train": 20000, "valid": 1000, "test": 1000}
SPLITS = ("train", "valid", "test")
EXTENSIONS = (".tsv.gz", ".tsv", ".txt.gz", ".txt")
NAMED = ("synthetic", "tatoeba")
MIN_EVAL_SOURCES = 100


def eval_sources(sources: int) -> int:
    """How many distinct English sentences go to validation (and as many to test): 2%, but at
    least `MIN_EVAL_SOURCES` or a tenth of a small corpus."""
    return max(1, sources // 50, min(MIN_EVAL_SOURCES, sources // 10))


def split_by_source(pairs: Sequence[Pair], seed: int) -> dict[str, list[Pair]]:
    """The train/valid/test split by English sentence, reproducible from ``seed`` (`eval_sources`);
    DataError under 3 distinct English sentences."""
    groups: dict[str, list[Pair]] = {}
    for en, fr in pairs:
        groups.setdefault(en, []).append((en, fr))
    order = list(groups.values())
    if len(order) < 3:
        raise DataError(f"need at least 3 distinct English sentences to split, got {len(order)}")
    random.Random(seed).shuffle(order)
    n_eval = eval_sources(len(order))
    parts = {"valid": order[:n_eval], "test": order[n_eval:2 * n_eval], "train": order[2 * n_eval:]}
    return {name: [p for group in part for p in group] for name, part in parts.items()}


def read_pair_file(path: Path, *, strict: bool = False, log: Log | None = None) -> list[Pair]:
    """The pairs of an ``english<TAB>french`` file (maybe gzip); skipped lines are logged by reason
    (``strict``: a DataError instead). DataError: unreadable, or no pair at all."""
    result = read_pairs(path, strict=strict)
    if result.drops.total and log is not None:
        log(result.drops.format(str(path)))
    if not result.pairs:
        raise DataError("no sentence pairs found (expected english<TAB>french lines)",
                        path=str(path))
    return result.pairs


def split_files(folder: Path) -> dict[str, Path]:
    """``{"train", "valid", "test"}`` files of ``folder``; DataError when one is missing."""
    found = {split: next((folder / f"{split}{ext}" for ext in EXTENSIONS
                          if (folder / f"{split}{ext}").is_file()), None) for split in SPLITS}
    if None in found.values():
        raise DataError("folder needs train, valid and test .tsv[.gz] or .txt[.gz] files",
                        path=str(folder))
    return found


def data_spec(data: str, seed: int = 0, train_size: int | None = None) -> dict[str, Any]:
    """The JSON description of ``data`` that `load_splits` turns back into pairs (``seed`` makes
    the synthetic corpus and the split; ``train_size``: synthetic training pairs, default 20000);
    DataError: no such file or folder, or a folder without the three split files."""
    if data == "synthetic":
        return {"kind": "synthetic", "seed": seed, **SYNTHETIC_SIZES,
                "train": SYNTHETIC_SIZES["train"] if train_size is None else train_size}
    if data == "tatoeba":
        return {"kind": "tatoeba", "split_seed": seed}
    path = Path(data)
    if path.is_dir():
        split_files(path)
        return {"kind": "folder", "path": str(path.resolve())}
    if not path.exists():
        raise DataError("no such file or folder (expected synthetic, tatoeba, a pairs file or a "
                        "folder with train/valid/test files)", path=str(path))
    data_file(path)
    return {"kind": "file", "path": str(path.resolve()), "split_seed": seed}


def spec_name(spec: dict[str, Any]) -> str:
    """What a spec was made from, for messages and comparisons: the name or the path."""
    return spec.get("path") or spec.get("kind", "?")


def load_splits(spec: dict[str, Any], *, progress: bool = True, strict: bool = False,
                log: Log | None = None) -> dict[str, list[Pair]]:
    """``{"train", "valid", "test"}`` lists of ``(english, french)`` for a `data_spec` (``strict``,
    ``log`` as `read_pair_file`); DataError: unreadable files or an unknown kind."""
    kind = spec.get("kind")
    if kind == "synthetic":
        return synthetic_splits(spec["seed"], spec["train"], spec["valid"], spec["test"])
    if kind == "folder":
        return {split: read_pair_file(path, strict=strict, log=log)
                for split, path in split_files(Path(spec["path"])).items()}
    if kind in ("tatoeba", "file"):
        path = tatoeba_fra_eng(progress=progress) if kind == "tatoeba" else Path(spec["path"])
        return split_by_source(read_pair_file(path, strict=strict, log=log), spec["split_seed"])
    raise DataError(f"unknown data kind {kind!r} in the run's config.json")


def eval_pairs(data: str | None, run_spec: dict[str, Any], *, strict: bool = False,
               log: Log | None = None) -> list[Pair]:
    """The pairs an evaluation scores: for ``data`` None or the run's own corpus name, the run's
    test split; the other name, that corpus' default test split; a folder, its test file; a
    file, every pair in it."""
    if data is None or data == run_spec.get("kind"):
        return load_splits(run_spec, strict=strict, log=log)["test"]
    if data in NAMED:
        return load_splits(data_spec(data), strict=strict, log=log)["test"]
    path = Path(data)
    path = split_files(path)["test"] if path.is_dir() else data_file(path)
    return read_pair_file(path, strict=strict, log=log)
