"""A run folder as the apps read it: ``config.json`` (which app, which format) and the run's
own files, through one checked door (`run_file`: regular files inside the run, size caps);
every failure is one `CheckpointError` naming the file. The rules for training into a folder
are `attnkit.training.run_folder`'s; what a folder holds: docs/guide/options.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from torch import nn

from attnkit.apps.results import Loaded
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError
from attnkit.fileio import MAX_JSON_BYTES, MAX_VOCAB_BYTES, checked_file, read_json_object
from attnkit.training.run_folder import checked_sizes, load_model

T = TypeVar("T")
LoadedT = TypeVar("LoadedT", bound=Loaded)

FORMAT = 2                 # the format of the runs this code writes and reads
CONFIG_FILE = "config.json"


def read_config(run: str | os.PathLike, app: str) -> dict[str, Any]:
    """``RUN/config.json`` of a run of ``app`` in this code's `FORMAT`; CheckpointError: not a run
    folder, another app's run, another format, an unreadable file.
    """
    run = Path(run)
    if not run.is_dir():
        raise CheckpointError(f"{run}: no such run folder")
    path = run / CONFIG_FILE
    if not os.path.lexists(path):
        raise CheckpointError(f"{run}: not a run folder (config.json is missing)")
    config = read_json_object(path, "the run's config", root=run)
    found = config.get("app")
    if found != app:
        if isinstance(found, str) and found.isidentifier():
            raise CheckpointError(f"{run} is a {found} run, not a {app} run; use "
                                  f"'attnkit {found} ...' with it")
        raise CheckpointError(f"{path}: not written by attnkit {app} (app is {found!r})")
    if config.get("format") != FORMAT:
        raise CheckpointError(f"{path}: run format {config.get('format')!r} is not the one this "
                              f"attnkit reads ({FORMAT}); it was written by another version of "
                              "attnkit")
    return config


def run_file(run: str | os.PathLike, name: str, what: str, *,
             limit: int | None = MAX_JSON_BYTES) -> Path:
    """``RUN/name`` checked for reading (present, a regular file inside the run, at most ``limit``
    bytes); ``what`` names it in messages. CheckpointError otherwise.
    """
    return checked_file(Path(run) / name, what, root=run, limit=limit)


def read_vocab(run: str | os.PathLike, name: str = "vocab.json") -> Vocab:
    """The vocabulary file ``RUN/name`` (`run_file`, at most `MAX_VOCAB_BYTES`); CheckpointError."""
    path = run_file(run, name, "the run's vocabulary", limit=MAX_VOCAB_BYTES)
    try:
        return Vocab.from_json(path)
    except (DataError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: not a vocabulary file ({exc})") from None


def read_model_config(run: str | os.PathLike, build: Callable[[dict[str, Any]], T],
                      sizes: Iterable[str], *, zero_ok: tuple[str, ...] = (),
                      what: str = "a model config", stored: dict[str, Any] | None = None) -> T:
    """``RUN/model.json`` (or ``stored``) built by ``build``, its sizes checked first
    (`checked_sizes`: a size edited to 10^12 is refused before allocation); CheckpointError.
    """
    path = Path(run) / ("model.json" if stored is None else CONFIG_FILE)
    data = read_json_object(path, "the run's model settings", root=run) if stored is None \
        else stored
    checked_sizes({k: data.get(k) for k in sizes}, str(path), zero_ok=zero_ok)
    try:
        return build(data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not {what} ({exc})") from None


def read_run(loaded: Callable[..., LoadedT], run: str | os.PathLike, app: str, *,
             model_config: Callable[[Path, dict[str, Any]], T],
             pipeline: Callable[[Path, dict[str, Any], T], Any], build: Callable[[T], nn.Module],
             describe: Callable[[T], str], model_file: str, weights: str = "best",
             device: str | None = None) -> LoadedT:
    """A trained run of ``app`` read in the order every app reads one: ``config.json``,
    ``model_config(run, config)``, ``pipeline(run, config, model config)``, then the model
    (``build(model config)``, ``model_file`` named if it fails) with its ``weights`` in eval mode
    on ``device`` (None: CPU), as ``loaded(...)``. CheckpointError; UsageError: a bad device.
    """
    run = Path(run)
    config = read_config(run, app)
    model_cfg = model_config(run, config)
    run_pipeline = pipeline(run, config, model_cfg)
    model, device = load_model(lambda: build(model_cfg), run, weights, device,
                               f"{run / model_file}")
    return loaded(run, app, model, run_pipeline, config, device, description=describe(model_cfg))
