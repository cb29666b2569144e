"""Loading a translation run for either engine: attnkit's own decoding of a training run, or
CTranslate2 with a folder written by ``attnkit translate export``.

Example:
    ```python
    loaded = load("runs/fr")                              # a training run, attnkit's engine
    exported = load("runs/fr-ct2", engine="ctranslate2")  # an exported folder
    loaded.engine.translate(["I am cold."])[0].text
    ```
"""

from __future__ import annotations

import os
from pathlib import Path

from attnkit.apps.base import Loaded
from attnkit.apps.options import build_bounded, resolve_device
from attnkit.apps.run_files import weights_file
from attnkit.apps.runs import read_config
from attnkit.apps.translate import ct2
from attnkit.apps.translate.engines import AttnkitEngine, summary_of
from attnkit.apps.translate.pipeline import run_model_config, run_pipeline
from attnkit.errors import CheckpointError, UsageError
from attnkit.models import build_model
from attnkit.training import load_weights

APP = "translate"
ENGINES = ("attnkit", "ctranslate2")


def load(run: str | os.PathLike, *, weights: str = "best", device: str | None = None,
         engine: str | None = None) -> Loaded:
    """A trained run (``engine="ctranslate2"``: a folder `export_run` wrote).

    Raises:
        CheckpointError: not a translate run, broken files, vocabularies that do not match
            the ones the weights were trained with, missing or truncated weights.
        UsageError: an unknown engine; CTranslate2 not installed.
    """
    engine = engine or "attnkit"
    if engine not in ENGINES:
        raise UsageError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine == "ctranslate2":
        return ct2.load_exported(run, device=device or "cpu")
    run = Path(run)
    if (run / "model.bin").is_file():
        raise CheckpointError(f"{run}: an exported CTranslate2 model, not a training run; "
                              "use it with --engine ctranslate2")
    config = read_config(run, APP)
    model_config = run_model_config(run, config)
    pipeline = run_pipeline(run, config, model_config)
    model = build_bounded(lambda: build_model(model_config), f"{run / 'config.json'}")
    load_weights(model, weights_file(run, weights))
    device = resolve_device(device)
    model.to(device).eval()
    return Loaded(run, APP, model, pipeline, config, device,
                  engine=AttnkitEngine(model, pipeline),
                  description=summary_of(model_config))
