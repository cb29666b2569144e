"""Word alignment with a translation run (`align_pairs`: eflomal, the run's trained aligner or
its attention), and the run's trained aligner (`train_aligner`, saved in ``RUN/alignment/``
with the pairs it learnt from). Guide: docs/guide/translate.md."""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.alignment.aligner import (
    ATTENTION_DEFAULT,
    AlignResult,
    Method,
    adapt_head,
    align,
    check_pairs,
    eflomal_align,
    read_head,
    train_head,
    write_head,
)
from attnkit.apps.results import Log, stderr_log
from attnkit.apps.translate.engines import TranslateLoaded
from attnkit.apps.translate.settings import align_layer, stored_settings
from attnkit.errors import DataError, UsageError
from attnkit.fileio import atomic_write_bytes
from attnkit.models.alignment_head import AlignmentHead
from attnkit.models.config import TransformerConfig

__all__ = ["AlignResult", "Method", "align_pairs", "check_pairs", "load_head", "train_aligner"]

FOLDER = "alignment"   # RUN/alignment: the run's trained aligner
# The raw pairs the aligner learnt from, kept in the run for its adaptation: at most
# MAX_BACKGROUND pairs (Tatoeba's 160,916 whole), read back within MAX_BACKGROUND_BYTES.
BACKGROUND = f"{FOLDER}/background.tsv.gz"
MAX_BACKGROUND = 200_000
MAX_BACKGROUND_BYTES = 64 << 20


def load_head(run: str | os.PathLike) -> tuple[AlignmentHead | None, dict[str, Any] | None]:
    """The run's trained aligner and its ``head.json``; ``(None, None)`` when it has none
    (`attnkit.alignment.aligner.read_head`)."""
    return read_head(Path(run) / FOLDER, root=run)


def background_pairs(loaded: TranslateLoaded, data: str | None) -> list[tuple[str, str]]:
    """Raw pairs eflomal learns from besides those to align: ``data`` (a pairs file or a folder's
    training split), else the run's `BACKGROUND`, else (an aligner trained before it was kept)
    the run's training data where its config says.
    """
    from attnkit.apps.run_files import run_file
    from attnkit.data.translation_splits import data_spec, load_splits, read_pair_file

    if data is None and os.path.lexists(loaded.path / BACKGROUND):
        return read_pair_file(run_file(loaded.path, BACKGROUND, "the aligner's training pairs",
                                       limit=MAX_BACKGROUND_BYTES))
    spec = loaded.config["data"] if data is None else data_spec(data, 0, None)
    try:
        return load_splits(spec, progress=False)["train"]
    except DataError as exc:
        where = "--adapt-data" if data is not None else "the run's training data"
        raise UsageError(f"eflomal reads {where} and cannot ({exc}); give --adapt-data DATA "
                         "(a pairs file or a train/valid/test folder), or align without it: "
                         "--method attention (--no-adapt with a trained aligner)") from None


def align_pairs(loaded: TranslateLoaded, sources: Sequence[Sequence[str]],
                targets: Sequence[Sequence[str]], *, method: Method | None = None,
                extraction: str | None = None, threshold: float | None = None,
                symmetrize: str | None = None, adapt: bool | None = None,
                adapt_minutes: float = 10.0, adapt_data: str | None = None,
                normalize: bool = True, model_only: bool = False,
                log: Log = stderr_log) -> AlignResult:
    """Align the whitespace tokens of sentence pairs with a run; None takes the default:
    eflomal (`CLASSICAL_DEFAULT`, the best measured) where it is installed, else (or with
    ``model_only``) the run's trained aligner with its settings, else the head an
    ``--align-loss`` run trained (`SUPERVISED_DEFAULTS`), else `ATTENTION_DEFAULT`.

    Args:
        sources, targets: each pair's tokens (`attnkit.alignment.aligner.check_pairs`).
        method, extraction, threshold, symmetrize, normalize: as `attnkit.alignment.aligner.align`.
        adapt: fit the trained aligner to these pairs first, within ``adapt_minutes``, on
            ``adapt_data`` (None: the run's pairs); ``log`` announces it. eflomal also learns
            from ``adapt_data``.

    Raises:
        UsageError: a run without attention (for a model's method); an unknown setting; the
            trained method on a run without one; pieces beyond what an option names.
    """
    if method is None and not model_only and importlib.util.find_spec("eflomal") is not None:
        method = CLASSICAL_DEFAULT["method"]
    if method is not None and method.kind == "eflomal":
        if method.shift:
            raise UsageError("--shift reads attention: use it with --method attention")
        if extraction is not None or threshold is not None:
            raise UsageError("eflomal gives links, not weights: --extraction and --threshold "
                             "apply to the other methods")
        return eflomal_align(sources, targets, background_pairs(loaded, adapt_data),
                             symmetrize or CLASSICAL_DEFAULT["symmetrize"])
    if loaded.model is None:
        raise UsageError(f"{loaded.path}: an exported CTranslate2 model has no attention to "
                         "align with; use the training run")
    if getattr(loaded.model.config, "attention", None) == "none":
        raise UsageError(f"{loaded.path}: this model has no attention (attention='none'), so "
                         "it cannot align words; use a run with attention")
    head, info = load_head(loaded.path) if loaded.trained_here else (None, None)
    base = {**ATTENTION_DEFAULT, "adapt": False}
    supervised = supervised_head(loaded)
    if supervised is not None:
        base = {**base, "method": supervised, **SUPERVISED_DEFAULTS}
    if head is not None:
        base = {**base, "method": Method("head"), "symmetrize": "intersection", "adapt": True,
                **info.get("defaults", {})}
    given = {"method": method, "extraction": extraction, "threshold": threshold,
             "symmetrize": symmetrize, "adapt": adapt}
    settings = {**base, **{k: v for k, v in given.items() if v is not None}}
    if settings["method"].kind == "head" and head is None:
        # Suggest only what this run accepts: align-train refuses an RNN run.
        rnn = not isinstance(loaded.model.config, TransformerConfig)
        raise UsageError("this run has no trained aligner (RUN/alignment/head.safetensors); "
                         + ("the trained aligner reads a Transformer's states and this is an "
                            "RNN run: align it with --method attention" if rnn else
                            "train one with `attnkit translate align-train`, or use --method "
                            "attention"))
    fit = functools.partial(adapt_head, background=lambda: background_pairs(loaded, adapt_data),
                            minutes=adapt_minutes, log=log)
    return align(loaded.model, loaded.pipeline, sources, targets, settings, head=head,
                 adapt=fit if settings["adapt"] else None, normalize=normalize)


# What `translate align` does by default where eflomal is installed: eflomal beat every
# method that reads the model on the WPT03 trial set (docs/results.md, "Word alignment").
CLASSICAL_DEFAULT = {"method": Method("eflomal"), "symmetrize": "intersection"}
# How `translate align` reads the head an --align-loss run trained, by default (measured on
# the WPT03 trial set: docs/results.md, "The alignment loss (Garg et al. 2019)").
SUPERVISED_DEFAULTS = {"extraction": "argmax", "symmetrize": "intersection"}
# What `translate align` does by default with a trained aligner (measured on the WPT03 trial
# set: docs/results.md, "Word alignment").
HEAD_DEFAULTS = {"extraction": "argmax", "symmetrize": "intersection", "threshold": 0.5,
                 "adapt": True}


def supervised_head(loaded: TranslateLoaded) -> Method | None:
    """The attention head an ``--align-loss`` run trained, read where it learnt: at the step
    that reads each target piece; None for another run."""
    if loaded.model is None or not loaded.config.get("options", {}).get("align_loss"):
        return None
    layer = align_layer(stored_settings(loaded.config), loaded.model.config)
    return Method("attention", layer=layer, head=0, shift=True)


def train_aligner(run: str | os.PathLike, *, data: str | None = None, pairs: int = 20000,
                  minutes: float = 2.0, layer: int | None = None, seed: int = 0,
                  log: Log = stderr_log) -> Path:
    """Train and save the aligner of a Transformer run into ``RUN/alignment`` (returned):
    ``pairs`` of ``data`` (None: the run's) label the head on decoder ``layer`` (1-based, None:
    the last), within ``minutes`` in all; ``seed`` picks pairs and batch order. UsageError: not a
    Transformer run; a bad count or budget.
    """
    from attnkit.apps.translate import load_run

    if pairs < 1 or minutes <= 0:
        raise UsageError("--pairs and --max-minutes must be positive")
    start = time.monotonic()
    loaded = load_run(run)
    c = loaded.model.config
    if not isinstance(c, TransformerConfig):
        raise UsageError(f"{run}: the trained aligner reads a Transformer's states; this is an "
                         "RNN run (align it with --method attention)")
    if layer is not None and not 1 <= layer <= c.layers:
        raise UsageError(f"--layer must be from 1 to {c.layers}")
    corpus = background_pairs(loaded, data)
    head, trained = train_head(loaded.model, loaded.pipeline, corpus, pairs=pairs,
                               seconds=minutes * 60 - (time.monotonic() - start),
                               layer=-1 if layer is None else layer - 1, seed=seed, log=log)
    trained["total_seconds"] = round(time.monotonic() - start, 1)
    folder = write_head(loaded.path / FOLDER, head, defaults=HEAD_DEFAULTS, trained=trained)
    kept = "".join(f"{en}\t{fr}\n" for en, fr in corpus[:MAX_BACKGROUND])
    atomic_write_bytes(loaded.path / BACKGROUND, gzip.compress(kept.encode("utf-8"), 6))
    return folder
