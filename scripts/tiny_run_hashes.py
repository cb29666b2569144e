"""Train every app's tiny run (`attnkit.apps.App.tiny`, as the contract test does), and the
translate one as a Transformer, at one thread and print a sha256 of their weights: what a
refactoring of the app layer must not change.

Run it on two trees (``PYTHONPATH=OTHER/src python scripts/tiny_run_hashes.py``) and compare
the lines; the hash covers every tensor of ``best.safetensors`` and ``last/model.safetensors``,
name by name in sorted order (not the files' JSON headers, which hold paths and times).

Usage: ``python scripts/tiny_run_hashes.py [FOLDER]`` (default: a temporary folder).
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.numpy import load_file

APPS = ("translate", "sentiment", "caption")
# The translate tiny run as a Transformer (its RNN sizes dropped): the other architecture's path.
TRANSFORMER = {"arch": "transformer", "d_model": 16, "heads": 2, "layers": 1, "ff_dim": 32,
               "warmup": 10}


def tensors_sha256(path: Path) -> str:
    """sha256 over the names, dtypes, shapes and bytes of every tensor in ``path``."""
    digest = hashlib.sha256()
    tensors = load_file(str(path))
    for name in sorted(tensors):
        array = tensors[name]
        digest.update(f"{name}:{array.dtype}:{list(array.shape)}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def main(folder: str | None = None) -> int:
    from attnkit.apps import APPS as REGISTRY

    torch.set_num_threads(1)
    root = Path(folder or tempfile.mkdtemp(prefix="attnkit-tiny-"))
    for name in (*APPS, "translate-transformer"):
        app = REGISTRY[name.split("-")[0]]
        where = root / name
        tiny = app.tiny(where)
        settings = tiny.settings
        if name == "translate-transformer":
            settings = {**{k: v for k, v in settings.items() if k not in ("hidden", "emb_dim")},
                        **TRANSFORMER}
        run = app.train(settings, where / "run", log=lambda _: None)
        best = tensors_sha256(run.path / "best.safetensors")
        last = tensors_sha256(run.path / "last" / "model.safetensors")
        print(f"{name:22} best {best[:16]}  last {last[:16]}  ({run.stop_reason}, "
              f"{run.global_step} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
