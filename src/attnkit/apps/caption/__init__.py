"""Image captioning with spatial attention (Show, Attend and Tell) on synthetic duck scenes or
Flickr/COCO captions. `CaptionApp` (``"caption"``) keeps the `attnkit.apps.base.App` contract;
its methods are the Python API, here as functions too (``train``, ``load_run``, ``evaluate``,
``predict``); `write_scenes` draws example scenes. Guide: docs/guide/caption.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from attnkit.apps.base import App, TinyRun
from attnkit.apps.caption import evaluation, prediction, training
from attnkit.apps.caption import prepare as preparation
from attnkit.apps.caption.prediction import CaptionPrediction
from attnkit.apps.caption.prepare import CaptionLoaded
from attnkit.apps.caption.scenes import SCENE_COMMAND, write_scenes
from attnkit.apps.caption.settings import TRAIN_HELP, CaptionSettings
from attnkit.explain.captions import grounding_table, pointing_table
from attnkit.models.captioner import ATTENTIONS, CaptionerConfig
from attnkit.settings import Option, options_of

__all__ = ["APP", "CaptionApp", "CaptionLoaded", "CaptionPrediction", "CaptionSettings",
           "evaluate", "grounding_table", "load_run", "predict", "train", "write_scenes"]

DATA_HELP = ('"synthetic" (default), "flickr:TOKEN_FILE:IMAGE_DIR" or '
             '"coco:CAPTIONS_JSON:IMAGE_DIR"')
OPTIONS = (
    *options_of(CaptionSettings),   # their help states each default
    Option("--attention", str, f"how a word looks at the image (default "
           f"{CaptionerConfig.attention})", choices=ATTENTIONS),
    Option("--beam", int, "beam size (default 1 = greedy)", ("eval", "predict"),
           dest="beam_size"),
    Option("--examples", int, f"test images shown on the --report page (default "
           f"{evaluation.DEFAULT_EXAMPLES})", ("eval",), metavar="N"),
    Option("--max-pixels", int, "refuse image files larger than N pixels, before decoding "
           f"them (default {prediction.MAX_PIXELS:,})", ("predict",), metavar="N"),
    Option("--explain", str, "maps beside attention: grad-input, integrated-gradients "
           "(comma-separated, or all; the first is what --plot draws; the page offers them "
           "all; pip install 'attnkit[explain]')", ("predict",), metavar="METHOD"),
    Option("--pointing", None, "also score each explanation method in the pointing game "
           "(synthetic scenes; gradients need pip install 'attnkit[explain]')", ("eval",)),
)


class CaptionApp(App, configure=CaptionSettings.configure, prepare=preparation.prepare,
                 reload=preparation.reload, fit=training.fit, load=preparation.load,
                 evaluation=evaluation.evaluation, predictions=prediction.predictions):
    """Image captioning with spatial attention (Show, Attend and Tell)."""

    name = "caption"
    help = "image captioning with spatial attention (Show, Attend and Tell)"
    description = ("Train, evaluate and visualise an attention captioner (CNN + LSTM). "
                   "Images of any size or mode are converted to RGB and resized.")
    inputs = "image"
    evaluation_keys = ("examples", "beam_size")
    options = OPTIONS
    commands = (SCENE_COMMAND,)
    headline = ("accuracy", "bleu4")
    plot_aliases = ("--out",)
    examples = (
        "attnkit caption train --out runs/ducks             # synthetic duck scenes, ~5 min "
        "on a quiet 2-core CPU",
        "attnkit caption train --out runs/ducks-hard --attention hard --epochs 20",
        "attnkit caption train --resume runs/ducks --max-minutes 20   # continue, new budget",
        "attnkit caption train --out runs/tiny --num-train 64 --image-size 32 --epochs 2",
        "attnkit caption eval --run runs/ducks --report ducks.html   # with examples' attention",
        "attnkit caption scene --out duck.png                # an example scene to caption",
        "attnkit caption predict --run runs/ducks duck.png --plot duck_attention.png",
        "ls photos/*.jpg | attnkit caption predict --run runs/f8k     # paths on stdin",
        "", f"--data is {DATA_HELP}.")
    train_help = {"data": f"training data: {DATA_HELP}", **TRAIN_HELP,
                  "patience": "stop after N evaluations without a better validation score "
                              "(default 0: never stop early)",
                  "threads": "CPU threads for torch (default 1: the small convolutions and "
                             "per-word LSTM steps gain little from more; a resume: the "
                             "run's)"}
    eval_help = "accuracy, BLEU-4 and attention grounding on held-out data"
    eval_data_help = (f"evaluate on this data instead: {DATA_HELP} (a real data set other than "
                      "the run's: all its images)")
    default_threads = {"train": 1}

    def checked_inputs(self, inputs: Any, what: str = "predict") -> list[Any]:
        """One image (a path or an array) or a list of them."""
        one = isinstance(inputs, (str, os.PathLike, np.ndarray))
        return super().checked_inputs([inputs] if one else inputs, what)

    def tiny(self, folder: Path) -> TinyRun:
        """16 synthetic scenes of 32 pixels, one epoch; two scene files in ``folder``."""
        scenes = write_scenes(Path(folder) / "scene.png", count=2, size=32)
        return TinyRun({"data": "synthetic", "num_train": 16, "num_valid": 4, "num_test": 4,
                        "image_size": 32, "epochs": 1, "batch_size": 8, "hidden": 32,
                        "max_minutes": None, "progress": False},
                       [str(path) for path, _ in scenes])

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        lines = [f"exact-match accuracy {metrics['accuracy']:.4f}  BLEU-4 "
                 f"{metrics['bleu4']:.4f}  ({metrics['examples']} images, beam "
                 f"{metrics['beam_size']})"]
        if "grounding_mass" in metrics:
            lines.append(grounding_table(metrics))
        if metrics.get("pointing"):
            lines.append(pointing_table(metrics["pointing"]))
            if metrics.get("attention_supervision", 0) > 0:
                lines.append(f"note: trained with supervised attention on these boxes (weight "
                             f"{metrics['attention_supervision']:g}): the figures measure fit, "
                             "not emergent grounding")
        return "\n".join(lines)


APP = CaptionApp()


# The Python API: the app's own methods (`App.train` takes the data first, or a mapping).
train, load_run, evaluate, predict = APP.train, APP.load, APP.evaluate, APP.predict
