"""Word alignment with a translation run (`align_pairs`): eflomal fitted on the pairs and the
run's training pairs, or the run's attention (an ``--align-loss`` run: the head it trained).
Guide: docs/guide/translate.md."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from attnkit.alignment.aligner import (
    ATTENTION_DEFAULT,
    AlignResult,
    Method,
    align,
    check_pairs,
    eflomal_align,
)
from attnkit.apps.translate.engines import TranslateLoaded
from attnkit.apps.translate.settings import align_layer, stored_settings
from attnkit.errors import DataError, UsageError

__all__ = ["AlignResult", "Method", "align_pairs", "check_pairs"]


def background_pairs(loaded: TranslateLoaded, data: str | None) -> list[tuple[str, str]]:
    """Raw pairs eflomal learns from besides those to align: ``data`` (a pairs file or a folder's
    training split), else the run's training data where its config says."""
    from attnkit.data.translation_splits import data_spec, load_splits

    spec = loaded.config["data"] if data is None else data_spec(data, 0, None)
    try:
        return load_splits(spec, progress=False)["train"]
    except DataError as exc:
        where = "--eflomal-data" if data is not None else "the run's training data"
        raise UsageError(f"eflomal reads {where} and cannot ({exc}); give --eflomal-data DATA "
                         "(a pairs file or a train/valid/test folder), or align without it: "
                         "--method attention") from None


def align_pairs(loaded: TranslateLoaded, sources: Sequence[Sequence[str]],
                targets: Sequence[Sequence[str]], *, method: Method | None = None,
                extraction: str | None = None, threshold: float | None = None,
                symmetrize: str | None = None, eflomal_data: str | None = None,
                normalize: bool = True, model_only: bool = False) -> AlignResult:
    """Align the whitespace tokens of sentence pairs with a run; None takes the default:
    eflomal (`CLASSICAL_DEFAULT`, the best measured) where it is installed, else (or with
    ``model_only``) the head an ``--align-loss`` run trained (`SUPERVISED_DEFAULTS`), else
    `ATTENTION_DEFAULT`.

    Args:
        sources, targets: each pair's tokens (`attnkit.alignment.aligner.check_pairs`).
        method, extraction, threshold, symmetrize, normalize: as `attnkit.alignment.aligner.align`.
        eflomal_data: the raw pairs eflomal learns from besides these (None: the run's).

    Raises:
        UsageError: a run without attention (for a model's method); an unknown setting; pieces
            beyond what an option names.
    """
    if method is None and not model_only and importlib.util.find_spec("eflomal") is not None:
        method = CLASSICAL_DEFAULT["method"]
    if method is not None and method.kind == "eflomal":
        if method.shift:
            raise UsageError("--shift reads attention: use it with --method attention")
        if extraction is not None or threshold is not None:
            raise UsageError("eflomal gives links, not weights: --extraction and --threshold "
                             "apply to the other methods")
        return eflomal_align(sources, targets, background_pairs(loaded, eflomal_data),
                             symmetrize or CLASSICAL_DEFAULT["symmetrize"])
    if loaded.model is None:
        raise UsageError(f"{loaded.path}: an exported CTranslate2 model has no attention to "
                         "align with; use the training run")
    if getattr(loaded.model.config, "attention", None) == "none":
        raise UsageError(f"{loaded.path}: this model has no attention (attention='none'), so "
                         "it cannot align words; use a run with attention")
    base = dict(ATTENTION_DEFAULT)
    supervised = supervised_head(loaded)
    if supervised is not None:
        base = {**base, "method": supervised, **SUPERVISED_DEFAULTS}
    given = {"method": method, "extraction": extraction, "threshold": threshold,
             "symmetrize": symmetrize}
    settings = {**base, **{k: v for k, v in given.items() if v is not None}}
    return align(loaded.model, loaded.pipeline, sources, targets, settings, normalize=normalize)


# What `translate align` does by default where eflomal is installed: eflomal beat every
# method that reads the model on the WPT03 trial set (docs/results.md, "Word alignment").
CLASSICAL_DEFAULT = {"method": Method("eflomal"), "symmetrize": "intersection"}
# How `translate align` reads the head an --align-loss run trained, by default (measured on
# the WPT03 trial set: docs/results.md, "The alignment loss (Garg et al. 2019)").
SUPERVISED_DEFAULTS = {"extraction": "argmax", "symmetrize": "intersection"}


def supervised_head(loaded: TranslateLoaded) -> Method | None:
    """The attention head an ``--align-loss`` run trained, read where it learnt: at the step
    that reads each target piece; None for another run."""
    if loaded.model is None or not loaded.config.get("options", {}).get("align_loss"):
        return None
    layer = align_layer(stored_settings(loaded.config), loaded.model.config)
    return Method("attention", layer=layer, head=0, shift=True)

