"""Weights and full training checkpoints: safetensors + JSON, atomic writes, checksums.

`save_weights` / `load_weights`: one ``.safetensors`` file (tied tensors stored once, JSON
metadata, sha256 of the tensors and of the header). `save_checkpoint` / `load_checkpoint`: the
folder ``RUN/last/`` (model, optimizer, ``state.json``), written beside the old one and swapped
in, so a crash at any moment leaves a complete checkpoint. Nothing is pickled; every problem
with a file raises `attnkit.errors.CheckpointError`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from attnkit.compiler import weights_digest
from attnkit.errors import CheckpointError
from attnkit.fileio import atomic_path, file_sha256, read_regular_file, remove, staged_folder

FORMAT_VERSION = 1
# Header format of a safetensors file: "2" checksums every header entry (_HEADER_SUM).
HEADER_FORMAT = "2"
_META_KEY, _FORMAT_KEY, _HEADER_SUM = "attnkit", "attnkit_format", "attnkit_header_sha256"
# Temporaries: ".<name>.<random>.tmp" of attnkit.fileio.atomic_path and save_checkpoint, and
# ".tmp<6 random>" of safetensors' own writer (it writes beside the target, then renames).
_TEMPORARY = re.compile(r"^(\..+\.[A-Za-z0-9_]+\.tmp|\.tmp[A-Za-z0-9]{6})$")
# The largest state.json a checkpoint holds (positions, RNG states, optimizer layout).
STATE_LIMIT = 64 << 20


def _json_sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _dedupe(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Drop tied tensors (safetensors refuses shared storage); return ``(tensors, aliases)``.

    Not ``safetensors.torch.save_model``: it keeps the alphabetically first name of a tied group
    (a Transformer's ``out.weight``), where the file keeps the first in state-dict order
    (``tgt_embedding.weight``) and names the others in its header."""
    seen: dict[tuple, str] = {}
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, t in state.items():
        key = (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape),
               t.stride(), t.dtype)
        if t.numel() and key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        tensors[name] = t.detach().cpu().contiguous()
    return tensors, aliases


def _write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None,
                   aliases: dict[str, str] | None, *, shown: Path, needed: int | None) -> None:
    """``tensors``, ``metadata`` and checksums to ``path``, atomically; a full disk is reported
    for ``shown`` (``needed`` bytes, default: this file's size)."""
    header = {_META_KEY: json.dumps(metadata or {}), "attnkit_sha256": weights_digest(tensors),
              "attnkit_aliases": json.dumps(aliases or {}), "format": "pt",
              _FORMAT_KEY: HEADER_FORMAT}
    header[_HEADER_SUM] = _json_sha256(header)
    with _disk_full_as_error(shown, needed or _tensor_bytes(tensors) + len(json.dumps(header))):
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata=header)


def _tensor_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


@contextmanager
def _disk_full_as_error(shown: Path, needed: int) -> Iterator[None]:
    """A full disk while writing ``shown`` becomes one CheckpointError saying what it needs."""
    try:
        yield
    except (OSError, SafetensorError) as e:
        # safetensors reports the OS error inside its own SafetensorError message.
        if not (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
                or "No space left on device" in str(e) or "Disk quota exceeded" in str(e)):
            raise
        size = next((f"{needed / unit:.1f} {name}" for name, unit in
                     (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if needed >= unit),
                    f"{needed} bytes")
        raise CheckpointError(f"cannot write {shown}: no space left on device (needs about "
                              f"{size})") from e


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(tensors, metadata)`` of a verified file of `save_weights` (tied tensors filled back
    in) or ``optimizer.safetensors``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file is missing")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file (truncated or "
                              f"corrupted?): {e}") from e
    fmt = header.get(_FORMAT_KEY)
    if fmt is None:
        raise CheckpointError(f"{path}: no attnkit header format; not written by "
                              "attnkit.training.checkpoint (or by an older attnkit)")
    if fmt != HEADER_FORMAT:
        raise CheckpointError(f"{path}: header format {fmt!r} is not supported (expected "
                              f"{HEADER_FORMAT!r}); altered, or written by a newer attnkit")
    if header.get(_HEADER_SUM) != _json_sha256({k: v for k, v in header.items()
                                                if k != _HEADER_SUM}):
        raise CheckpointError(f"{path}: checksum mismatch in the header metadata, the file was "
                              "altered or corrupted")
    if weights_digest(tensors) != header.get("attnkit_sha256"):
        raise CheckpointError(f"{path}: checksum mismatch, the file was altered or corrupted")
    for alias, target in json.loads(header["attnkit_aliases"]).items():
        tensors[alias] = tensors[target]
    return tensors, json.loads(header[_META_KEY])


def save_weights(model: nn.Module, path: str | os.PathLike,
                 metadata: dict[str, Any] | None = None) -> None:
    """Write ``model.state_dict()`` (tied tensors once) and JSON ``metadata`` to ``path``,
    atomically."""
    tensors, aliases = _dedupe(model.state_dict())
    _write_tensors(Path(path), tensors, metadata, aliases, shown=Path(path), needed=None)


def load_weights(model: nn.Module, path: str | os.PathLike) -> dict[str, Any]:
    """Load weights written by `save_weights` into ``model``; return their metadata.
    CheckpointError names the keys of weights written for another model."""
    tensors, metadata = load_tensors(path)
    check_state_fits(model.state_dict(), tensors, path)
    model.load_state_dict(tensors, strict=True)
    return metadata


def check_state_fits(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor],
                     path: str | os.PathLike) -> None:
    """CheckpointError naming keys/shapes when ``got`` is not a state dict for ``expected``."""
    problems = {
        "missing keys": sorted(set(expected) - set(got)),
        "unexpected keys": sorted(set(got) - set(expected)),
        "shape mismatch": [f"{k}: model {list(expected[k].shape)} vs file {list(got[k].shape)}"
                           for k in sorted(set(expected) & set(got))
                           if tuple(expected[k].shape) != tuple(got[k].shape)]}
    parts = [f"{what} {names[:5]}{' ...' if len(names) > 5 else ''}"
             for what, names in problems.items() if names]
    if parts:
        raise CheckpointError(f"{path}: checkpoint is from another model: " + "; ".join(parts))


# ---- optimizer state: tensors into safetensors, everything else into JSON ----

def flatten_optimizer(state_dict: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    """Split ``optimizer.state_dict()`` into safetensors-able tensors and a JSON-able rest."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, pstate in state_dict["state"].items():
        for name, value in pstate.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{pid}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(pid), {})[name] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
              for g in state_dict["param_groups"]]
    return tensors, {"scalars": scalars, "param_groups": groups}


def unflatten_optimizer(tensors: dict[str, torch.Tensor], rest: dict) -> dict[str, Any]:
    """Inverse of `flatten_optimizer`."""
    state: dict[int, dict[str, Any]] = {}
    for key, t in tensors.items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = t
    for pid, values in rest["scalars"].items():
        state.setdefault(int(pid), {}).update(values)
    groups = [{k: (tuple(v) if isinstance(v, list) and k != "params" else v)
               for k, v in g.items()} for g in rest["param_groups"]]
    return {"state": state, "param_groups": groups}


# ---- the full checkpoint folder ----

def save_checkpoint(folder: str | os.PathLike, model: nn.Module,
                    optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Write ``folder`` (``RUN/last``) with model, optimizer and the JSON-able ``state``,
    complete before it replaces the old one. CheckpointError (the old one left as it was): a
    full disk (with what it needs), or ``folder`` or its ``.prev`` a link."""
    folder = Path(folder)
    for path in (folder, _prev(folder)):
        if path.is_symlink():
            raise CheckpointError(f"{path} is a link to {os.path.realpath(path)}; a checkpoint "
                                  "is never written through a link: put the folder itself "
                                  "there")
    opt_tensors, opt_rest = flatten_optimizer(optimizer.state_dict())
    model_tensors, aliases = _dedupe(model.state_dict())
    # Both files plus headers and state.json: what the new folder takes beside the old one.
    needed = _tensor_bytes(model_tensors) + _tensor_bytes(opt_tensors) + (64 << 10)
    with staged_folder(folder, ".tmp") as tmp:
        os.chmod(tmp, 0o755)
        for name, tensors, names in (("model.safetensors", model_tensors, aliases),
                                     ("optimizer.safetensors", opt_tensors, None)):
            _write_tensors(tmp / name, tensors, None, names, shown=folder / name, needed=needed)
        body = {
            "format_version": FORMAT_VERSION,
            "sha256": {name: file_sha256(tmp / name)
                       for name in ("model.safetensors", "optimizer.safetensors")},
            "optimizer": opt_rest,
            "state": state,
        }
        doc = {"checksum": _json_sha256(body), **body}
        with _disk_full_as_error(folder / "state.json", needed):
            (tmp / "state.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        _swap_in(tmp, folder)


def _swap_in(new: Path, folder: Path) -> None:
    """Replace ``folder`` by the complete folder ``new``; at every moment ``folder`` or
    ``folder.prev`` holds a complete checkpoint."""
    prev = _prev(folder)
    if folder.exists():
        if prev.exists():
            shutil.rmtree(prev)
        os.replace(folder, prev)
    # Without ``folder`` (a crash mid-swap), ``prev`` is the only checkpoint until this line.
    os.replace(new, folder)
    if prev.exists():
        shutil.rmtree(prev)


def _prev(folder: Path) -> Path:
    """Where `_swap_in` keeps the previous checkpoint while it swaps the new one in."""
    return folder.with_name(folder.name + ".prev")


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete (and return) the temporaries (`_TEMPORARY`) that killed writes left in
    ``folder``; only when nothing writes into it, e.g. when a fit starts."""
    removed = [path for path in sorted(Path(folder).glob(".*")) if _TEMPORARY.match(path.name)]
    for path in removed:
        remove(path)
    return removed


def checkpoint_folder(folder: str | os.PathLike) -> Path:
    """``folder`` if present, else the ``.prev`` copy a crash mid-swap left; else error."""
    for candidate in (Path(folder), _prev(Path(folder))):
        if (candidate / "state.json").exists():
            return candidate
    raise CheckpointError(f"{folder}: no checkpoint found (the run was stopped before its "
                          "first checkpoint); start it again with --overwrite "
                          "(Trainer.fit(resume=False))")


def load_checkpoint(folder: str | os.PathLike, model: nn.Module,
                    optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Verify and load ``folder`` into ``model`` and ``optimizer``; return the JSON ``state``."""
    folder = checkpoint_folder(folder)
    path = folder / "state.json"
    try:
        doc = json.loads(read_regular_file(path, "the checkpoint's state", limit=STATE_LIMIT)
                         .decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: unreadable or truncated ({e})") from e
    if not isinstance(doc, dict) or "checksum" not in doc:
        raise CheckpointError(f"{path}: not an attnkit checkpoint (no checksum)")
    checksum = doc.pop("checksum")
    if _json_sha256(doc) != checksum:
        raise CheckpointError(f"{path}: checksum mismatch, the file was altered")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: format version {doc.get('format_version')} is not "
                              f"supported (expected {FORMAT_VERSION})")
    for name, digest in doc["sha256"].items():
        file = folder / name
        if not file.is_file():
            raise CheckpointError(f"{file}: checkpoint file is missing")
        if file_sha256(file) != digest:
            raise CheckpointError(f"{file}: checksum mismatch (truncated or altered file)")
    load_weights(model, folder / "model.safetensors")
    opt_tensors, _ = load_tensors(folder / "optimizer.safetensors")
    try:   # torch checks that the parameter groups match
        optimizer.load_state_dict(unflatten_optimizer(opt_tensors, doc["optimizer"]))
    except (ValueError, KeyError, RuntimeError) as e:
        raise CheckpointError(f"{folder}: optimizer state does not fit this model: {e}") from e
    return doc["state"]
