"""The data an app's steps pass around: a loaded run, a finished training, an evaluation,
prepared data, a run's settings (`RunSettings`, made by the one configure/resume path of
`AppSettings`); and the two logs every app uses. `Loaded` is generic in the model and the
pipeline (``Loaded[SentimentClassifier, TextPipeline]``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from attnkit.errors import CheckpointError
from attnkit.fileio import read_json, write_json
from attnkit.settings import check_resume, split_options
from attnkit.training import TrainConfig, TrainResult
from attnkit.training.config import NONE_IS_A_VALUE, checked_train_config

Log = Callable[[str], None]
ModelT = TypeVar("ModelT")
PipelineT = TypeVar("PipelineT")
SettingsT = TypeVar("SettingsT")
TEST_METRICS = "test_metrics.json"
# What runs after an app's training (`attnkit.apps.base.App.train`), as the
# progress line names it.
FINAL_EVALUATION = "the test evaluation"
# Fields of test_metrics.json that describe the training, kept when `eval` rewrites the file.
TRAINING_FIELDS = ("stop_reason", "train_seconds", "run")
TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))


def quiet(_: str) -> None:
    """A log that drops its lines."""


def stderr_log(line: str) -> None:
    """A log that prints its lines on stderr (stdout stays for results)."""
    print(line, file=sys.stderr)


@dataclass
class Loaded(Generic[ModelT, PipelineT]):
    """A trained run, loaded: what `App.load` returns.

    Attributes:
        path: the run folder (or an exported folder).
        model: the network in eval mode on ``device`` (None when another engine runs an export).
        pipeline: the app's text or image pipeline (tokenizer, vocabularies, sizes).
        config: the run's ``config.json``.
        engine: how the app runs the model, when it has a choice (attnkit or CTranslate2).
        description: the model in a few words, for pages and listings.
        trained_here: a training run (``evaluate`` writes its ``test_metrics.json``), not an export.
    """

    path: Path
    app: str
    model: ModelT
    pipeline: PipelineT
    config: dict[str, Any]
    device: str = "cpu"
    engine: Any = None
    description: str = ""
    trained_here: bool = True

    def summary(self) -> dict[str, Any]:
        """The run in a few readable fields, for reports, explorer pages and the server."""
        out: dict[str, Any] = {"run": str(self.path), "app": self.app,
                               "model": self.description or "-"}
        if self.model is not None:
            out["parameters"] = sum(p.numel() for p in self.model.parameters())
        data = self.config.get("data")
        if isinstance(data, dict):
            data = data.get("path") or data.get("kind")
        if data is not None:
            out["data"] = str(data)
        return out


@dataclass
class Run:
    """A training that has ended (what `App.train` returns): the trainer's ``result``, the best
    weights' ``test_metrics`` (None: stopped by a signal, or no test split) and the
    ``select_metric`` that chose them.
    """

    path: Path
    app: str
    result: TrainResult
    test_metrics: dict[str, Any] | None = None
    select_metric: str = ""

    def line(self, headline: tuple[str, ...] = ()) -> str:
        """One line: the run, why it stopped, its best validation score and its ``headline`` test
        metrics (4 significant digits).
        """
        best = ("none (stopped before its first evaluation)" if self.best_metric is None
                else f"{self.best_metric:.4g}")
        line = (f"run: {self.path}  stop: {self.stop_reason}  best validation "
                f"{self.select_metric or 'score'}: {best}")
        scores = [f"{k} {self.test_metrics[k]:.4g}" for k in headline
                  if isinstance((self.test_metrics or {}).get(k), (int, float))]
        return line + (f"  test (its weights): {', '.join(scores)}" if scores else "")

    def __getattr__(self, name: str) -> Any:
        """The trainer's `TrainResult` fields (``stop_reason``, ``best_metric``, ``epoch``...)."""
        return getattr(vars(self).get("result"), name)


@dataclass
class Evaluation:
    """What an app's `App.evaluation` returns: the metrics, and the report page when asked."""

    metrics: dict[str, Any]
    page: str | None = None


@dataclass
class TinyRun:
    """A run that trains in seconds (`App.tiny`, the contract test's): ``settings`` for ``train``,
    a few ``inputs`` for ``predict``.
    """

    settings: dict[str, Any]
    inputs: list[Any]


@dataclass
class RunSettings(Generic[SettingsT]):
    """A training's validated settings (`AppSettings.configure`'s): the app's ``settings``, the
    trainer's ``train`` config, on a resume the run's ``stored`` ``config.json``; ``spec``: the
    data spec (translate), ``model_options``: the model options given (caption).
    """

    settings: SettingsT
    train: TrainConfig
    stored: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None
    model_options: dict[str, Any] = field(default_factory=dict)


class AppSettings:
    """The base of a built-in app's settings dataclass: `configure`, the one path from the options
    given to a new run's or a resume's `RunSettings`. The app names the model and trainer
    options it takes beside its fields and what a resume applies, and writes two class methods:
    ``fresh(data, parts)``, a new run's `RunSettings` from the options by owner (``"settings"``,
    ``"model"``, ``"train"``), and ``stored(config, out)``, the settings a run stored with the
    values a resume compares the given ones with (CheckpointError).
    """

    app: ClassVar[str]
    model_options: ClassVar[tuple[str, ...]] = ()
    train_options: ClassVar[tuple[str, ...]] = ()
    resume_applies: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def configure(cls, given: dict[str, Any], out: Path, stored: dict[str, Any] | None
                  ) -> RunSettings:
        """`attnkit.apps.base.App.configure`: ``given`` holds ``data``, the settings' fields and
        the model and trainer options (None: not given, but a None budget is no budget)."""
        # None is "not given", except for a budget (None: no budget, never stop early).
        given = {k: v for k, v in given.items() if v is not None or k in NONE_IS_A_VALUE}
        data = given.pop("data", None)
        names = {f.name for f in dataclasses.fields(cls)} - {"data"}
        parts = split_options(given, {"settings": names, "model": cls.model_options, "train": (
            *cls.train_options, "patience") if cls.train_options else ()}, f"{cls.app} option")
        parts["model"].update(parts["settings"].pop("model_overrides", {}))
        parts["train"] = _trainer_options(parts["train"])
        if stored is None:
            return cls.fresh(data, parts)
        old, kept = cls.stored(stored, out)
        try:
            train = TrainConfig.from_dict(stored.get("train"))
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{out / 'config.json'}: bad \"train\" settings "
                                  f"({exc})") from None
        given = old.resume_given({**parts["settings"], **parts["model"], **parts["train"],
                                  "data": data})
        changes = {**check_resume({**kept, **train.to_dict()}, given, applied=cls.resume_applies),
                   **{k: given[k] for k in NONE_IS_A_VALUE if k in given}}   # None included
        train = checked_train_config({**train.to_dict(), **{
            k: v for k, v in _trainer_options(changes).items() if k in TRAIN_FIELDS}})
        return RunSettings(dataclasses.replace(old, **{k: v for k, v in changes.items()
                                                       if k in names}), train, stored)

    def resume_given(self, given: dict[str, Any]) -> dict[str, Any]:
        """The options given to a resume as the stored values read (a data path made absolute)."""
        return given


def _trainer_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the apps' ``patience`` (0: never stop early) as the trainer's
    ``early_stopping_patience`` (None: never)."""
    out = dict(options)
    if "patience" in out:
        out["early_stopping_patience"] = out.pop("patience") or None
    return out


@dataclass
class Prepared:
    """What a training needs, ready (every app's prepared data subclasses it): the validated
    ``config`` (`App.configure`'s; a `RunSettings` for the built-in apps), the trainer's
    ``train`` settings, and the pipeline ``files`` `App.save` writes by name (bytes, a dict as
    JSON, or an object with ``to_json(path)``).
    """

    config: Any
    train: TrainConfig
    files: dict[str, Any] = field(default_factory=dict)


def write_test_metrics(run: Path, metrics: dict[str, Any], keys: tuple[str, ...] = ()) -> Path:
    """Write an ``eval`` of the run's own test split into ``RUN/test_metrics.json`` when it ran
    as the final evaluation did (the same value of each of ``keys``: beam, sizes, engine...),
    else beside it into ``test_metrics.KEY-VALUE....json``. The training's fields (why it
    stopped, how long, best validation score) are kept; a read-only run is still evaluated, with
    a note. Returns the file written (or that would have been).
    """
    path = run / TEST_METRICS
    try:
        old = read_json(path, "the run's test metrics", root=run) if path.is_file() else {}
    except CheckpointError:
        old = {}
    old = old if isinstance(old, dict) else {}
    other = [k for k in keys if k in old and old[k] != metrics.get(k)]
    if other:
        name = ".".join(f"{k}-{_slug(metrics.get(k))}" for k in other)
        path = run / f"{Path(TEST_METRICS).stem}.{name}.json"
    kept = {k: v for k, v in old.items() if k in TRAINING_FIELDS or k.startswith("best_valid_")}
    try:
        write_json(path, {**metrics, **kept})
    except OSError as exc:
        stderr_log(f"attnkit: note: {path} not updated ({exc.strerror or exc})")
    return path


def _slug(value: Any) -> str:
    """A metric's value as part of a file name (``5``, ``0.6``, ``ctranslate2``, ``none``)."""
    text = "none" if value is None else str(value).lower()
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in text)[:40]
