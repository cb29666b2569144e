"""IMDB-style sentiment: a self-attention classifier trained into a run folder, and reviews
shaded by what decided them.

Presets (`attnkit.apps.sentiment.settings.PRESETS`):

* ``keras2018``: the 2018 Keras model and recipe: 30,000 words (Keras tokenizer), maxlen 100
  padded and truncated at the start, Adam 1e-3, batch 64, 5 epochs, no gradient clipping.
* ``best``: the most accurate recipe measured within a 15-minute CPU budget (one transformer
  block, attention pooling, hashed bigrams, one epoch; docs/results.md).

The app (`SentimentApp`, registered as ``"sentiment"``) keeps the contract of
`attnkit.apps.base.App`; the functions here are its Python API.

Example:
    ```python
    run = train("../shared/data/imdb", "runs/imdb", preset="keras2018")
    metrics = evaluate("runs/imdb")                          # the run's own test split
    pred = predict("runs/imdb", ["A wonderful, moving film."])[0]   # .prob, .tokens, .weights
    pred.render("review.png")
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.apps.base import App, Loaded, Log, Run, TinyRun, stderr_log
from attnkit.apps.options import Option
from attnkit.apps.sentiment import evaluation, prediction, settings, training
from attnkit.apps.sentiment import prepare as preparation
from attnkit.apps.sentiment.explain_command import EXPLAIN_COMMAND
from attnkit.apps.sentiment.prediction import SentimentPrediction
from attnkit.apps.sentiment.settings import PRESETS, Settings

__all__ = ["APP", "PRESETS", "SentimentApp", "SentimentPrediction", "Settings", "evaluate",
           "load_run", "predict", "train"]

DATA_FORMS = ('--data is an aclImdb/ folder, aclImdb_v1.tar.gz, a folder with train/test '
              '.jsonl.gz or .csv, a single .jsonl[.gz]/.csv file ({"text", "label"}; label 0/1 '
              'or neg/pos), or "download".')
OPTIONS = (
    Option("--preset", str, "model and recipe (default keras2018)", choices=tuple(PRESETS)),
    Option("--test-data", str, "test split location (default: --data when it has one)"),
    Option("--valid-fraction", float, "share of train held out for validation/selection "
           "(default: the preset's, 0.1 for keras2018, 0.04 for best)"),
    Option("--tokenizer", str, "override the preset's tokenizer",
           choices=("word", "char", "subword")),
    Option("--num-words", int, "vocabulary size (default: the preset's)"),
    Option("--maxlen", int, "tokens kept per review (default: the preset's)"),
    Option("--padding", str, "padding side (default pre)", choices=("pre", "post")),
    Option("--no-mask", None, "the 2018 behaviour: padding is attended and max-pooled",
           dest="mask_padding", const=False),
    Option("--no-test-curve", None, "do not log test accuracy after each epoch",
           dest="track_test", const=False),
    Option("--skip-bad", None, "skip (and count) malformed records", ("train", "eval")),
    Option("--split", str, "the split of --data (default test)", ("eval",),
           choices=("train", "test")),
    Option("--examples", int, "reviews shown on the --report page (default 20)", ("eval",),
           metavar="N"),
    Option("--color", str, "shade the words in the terminal (default: when stdout is one)",
           ("predict",), choices=("auto", "always", "never"), default="auto", stage="show"),
    Option("--explain", str, "explanations beside attention: rollout, grad-input, "
           "integrated-gradients (comma-separated, or all; the first shades the terminal; the "
           "page offers them all; gradients need pip install 'attnkit[explain]')",
           ("predict",), metavar="METHOD"),
)


class SentimentApp(App, steps=(settings, preparation, training, evaluation, prediction)):
    """Movie-review sentiment with self-attention (IMDB)."""

    name = "sentiment"
    help = "movie-review sentiment with self-attention (IMDB)"
    description = "Train, evaluate and explain self-attention sentiment classifiers."
    inputs = "review"
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
    train_help = {"data": "training data (see below); a resume takes the run's",
                  "epochs": "default: the preset's (5 keras2018, 1 best)",
                  "batch_size": "default 64",
                  "lr": "default: the preset's (1e-3 keras2018, 2e-3 best)",
                  "patience": "stop after N evaluations without a better validation accuracy "
                              "(default 0: never stop early)"}
    eval_help = "accuracy on labelled reviews"
    eval_data_help = "reviews to evaluate on (default: the run's own test data)"

    def has_test_split(self, loaded: Loaded) -> bool:
        return evaluation.own_test_data(loaded.config) is not None

    def training_report(self, run: Run) -> str | None:
        return training.format_curve(run.path)

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


def train(data=None, out=None, *, resume: bool = False, overwrite: bool = False,
          log: Log = stderr_log, **overrides: Any) -> Run:
    """Train a sentiment run into ``out`` (`App.train`); ``overrides`` are `Settings` and
    `attnkit.training.TrainConfig` fields (and ``patience``)."""
    return APP.train({"data": data, **overrides}, out, resume=resume, overwrite=overwrite,
                     log=log)


def load_run(run, *, device: str | None = "cpu", weights: str = "best") -> Loaded:
    """The best model of a run, its text pipeline and config (`App.load`)."""
    return APP.load(run, weights=weights, device=device)


def evaluate(run, data=None, **options: Any) -> dict:
    """Accuracy of a run on ``data`` (None: its own test data); options as
    `attnkit.apps.sentiment.evaluation.evaluation` plus ``report``, ``examples``, ``device``
    (`App.evaluate`)."""
    return APP.evaluate(run, data, **options)


def predict(run, texts: Sequence[str], **options: Any) -> list[SentimentPrediction]:
    """P(positive) and per-token weights of each review (`App.predict`)."""
    return APP.predict(run, texts, **options)
