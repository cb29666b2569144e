"""IMDB-style sentiment: a self-attention classifier trained into a run folder, and reviews
shaded by what decided them; presets ``keras2018`` and ``best`` (docs/guide/sentiment.md).
`SentimentApp` (``"sentiment"``) keeps the `attnkit.apps.base.App` contract; its methods are
the Python API, here as functions too (``train``, ``load_run``, ``evaluate``, ``predict``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnkit.apps.base import App, Run, TinyRun
from attnkit.apps.sentiment import evaluation, prediction, training
from attnkit.apps.sentiment import prepare as preparation
from attnkit.apps.sentiment.explain_command import EXPLAIN_COMMAND
from attnkit.apps.sentiment.prediction import SentimentPrediction
from attnkit.apps.sentiment.prepare import SentimentLoaded
from attnkit.apps.sentiment.settings import PRESETS, TRAIN_HELP, SentimentSettings
from attnkit.settings import Option, options_of

__all__ = ["APP", "PRESETS", "SentimentApp", "SentimentLoaded", "SentimentPrediction",
           "SentimentSettings", "evaluate", "load_run", "predict", "train"]

DATA_FORMS = ('--data is an aclImdb/ folder, aclImdb_v1.tar.gz, a folder with train/test '
              '.jsonl.gz or .csv, a single .jsonl[.gz]/.csv file ({"text", "label"}; label 0/1 '
              'or neg/pos), or "download".')
OPTIONS = (
    *options_of(SentimentSettings),   # the training options: their help states each default
    Option("--split", str, "the split of --data (default test)", ("eval",),
           choices=("train", "test")),
    Option("--examples", int, f"reviews shown on the --report page (default "
           f"{evaluation.DEFAULT_EXAMPLES})", ("eval",), metavar="N"),
    Option("--color", str, "shade the words in the terminal (default: when stdout is one)",
           ("predict",), choices=("auto", "always", "never"), default="auto", stage="show"),
    Option("--explain", str, "explanations beside attention: rollout, grad-input, "
           "integrated-gradients (comma-separated, or all; the first shades the terminal; the "
           "page offers them all; gradients need pip install 'attnkit[explain]')",
           ("predict",), metavar="METHOD"),
)


class SentimentApp(App, configure=SentimentSettings.configure, prepare=preparation.prepare,
                   reload=preparation.reload, fit=training.fit, load=preparation.load,
                   evaluation=evaluation.evaluation, predictions=prediction.predictions):
    """Movie-review sentiment with self-attention (IMDB)."""

    name = "sentiment"
    help = "movie-review sentiment with self-attention (IMDB)"
    description = "Train, evaluate and explain self-attention sentiment classifiers."
    inputs = "review"
    evaluation_keys = ("examples", "split")
    options = OPTIONS
    commands = (EXPLAIN_COMMAND,)
    headline = ("accuracy",)
    examples = (
        "attnkit sentiment train --preset keras2018 --data ../shared/data/imdb --out "
        "runs/imdb2018",
        "attnkit sentiment train --preset best --data aclImdb_v1.tar.gz --out runs/imdb "
        "--max-minutes 15",
        "attnkit sentiment train --resume runs/imdb --epochs 8     # continue, with a larger "
        "budget",
        "attnkit sentiment eval --run runs/imdb --report imdb.html  # the run's own test split",
        'attnkit sentiment predict --run runs/imdb --html review.html "Dull and far too long."',
        "attnkit sentiment predict --run runs/imdb --json < reviews.txt   # one review per line",
        "", DATA_FORMS)
    train_help = {"data": "training data (see below); a resume takes the run's", **TRAIN_HELP,
                  "patience": "stop after N evaluations without a better validation accuracy "
                              "(default 0: never stop early)"}
    eval_help = "accuracy on labelled reviews"
    eval_data_help = "reviews to evaluate on (default: the run's own test data)"

    def has_test_split(self, loaded: SentimentLoaded) -> bool:
        return loaded.config.get("test_data") is not None

    def training_report(self, run: Run) -> str | None:
        return training.format_curve(run.path, best_step=run.best_step)

    def tiny(self, folder: Path) -> TinyRun:
        """Reviews of a few words with one sentiment word each (train/test files in
        ``folder``), read by a 30-word vocabulary."""
        import gzip
        import json
        import random

        rng, data = random.Random(1), Path(folder) / "reviews"
        data.mkdir(parents=True, exist_ok=True)
        for split, n in (("train", 120), ("test", 40)):
            with gzip.open(data / f"{split}.jsonl.gz", "wt", encoding="utf-8") as f:
                for _ in range(n):
                    label = rng.randint(0, 1)
                    words = [rng.choice("the a film plot was".split()) for _ in range(6)]
                    words.insert(rng.randrange(7), "superb" if label else "awful")
                    f.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")
        return TinyRun({"data": str(data), "num_words": 30, "maxlen": 10, "epochs": 2,
                        "valid_fraction": 0.2, "batch_size": 16, "max_minutes": None,
                        "progress": False}, ["a superb film", "the plot was awful"])

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        line = (f"accuracy {metrics['accuracy']:.4f}  loss {metrics['loss']:.4f}  "
                f"({metrics['examples']} reviews of {metrics['data']}, {metrics['split']})")
        if metrics.get("truncated"):
            line += (f"\n{metrics['truncated']} of {metrics['examples']} reviews were longer "
                     "than the model reads; their cut tokens were not seen")
        return line


APP = SentimentApp()


# The Python API: the app's own methods (`App.train` takes the data first, or a mapping).
train, load_run, evaluate, predict = APP.train, APP.load, APP.evaluate, APP.predict
