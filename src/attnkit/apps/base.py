"""The App contract: the steps an application writes, and the flow every app shares.

An app is a subclass of `App` in `attnkit.apps.APPS`: it writes the steps (``configure``,
``prepare``, ``fit``, ``load``, ``evaluation``, ``predictions``, ``tiny``...) and the base runs
them alike for every app: ``train``, ``evaluate``, ``predict``, ``page``. Start at `App.train`;
the flow is drawn in docs/DEVELOPING.md ("The app contract").
"""

from __future__ import annotations

import os
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, ClassVar

from attnkit.apps.outputs import REPORT, output_file, write_output
from attnkit.apps.prediction import Prediction
from attnkit.apps.presentation import Presentation
from attnkit.apps.results import (
    FINAL_EVALUATION,
    TEST_METRICS,
    Evaluation,
    Loaded,
    Log,
    Prepared,
    Run,
    TinyRun,
    quiet,
    stderr_log,
    write_test_metrics,
)
from attnkit.apps.run_files import read_config
from attnkit.errors import Interrupted, UsageError
from attnkit.fileio import read_json, write_files, write_json
from attnkit.machine import torch_threads
from attnkit.training import TrainResult, distributed, run_folder, seed_everything
from attnkit.training.signals import interruptible

# What a subclass may name in its class statement (`App.__init_subclass__`).
STEPS = ("configure", "prepare", "save", "reload", "fit", "load", "evaluation", "predictions",
         "tiny", "has_test_split", "after_training")


class App(Presentation, ABC):
    """One application: a subclass writes the steps, the base runs them; `Presentation` says how
    the command line shows it. ``name``: the command and its runs' ``"app"``; ``inputs``: what
    ``predict`` takes, for messages (``"sentence"``, ``"review"``, ``"image"``).
    """

    name: ClassVar[str]
    inputs: ClassVar[str] = "input"
    # The metrics that say how an evaluation ran (beam, sizes, engine): an ``eval`` of the
    # run's test split that differs in one of them writes beside test_metrics.json.
    evaluation_keys: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **steps: Callable[..., Any]) -> None:
        """Bind the steps the class statement names (``class MyApp(App, fit=my_fit)``) as the
        app's methods, none looked up by name; a name not in `STEPS` is a TypeError."""
        unknown = sorted(set(steps) - set(STEPS))
        if unknown:
            raise TypeError(f"{cls.__name__}: not a step of an App: {', '.join(unknown)}")
        for name, function in steps.items():
            setattr(cls, name, staticmethod(function))
        super().__init_subclass__()

    # ------------------------------------------------------------------ the steps of an app
    @abstractmethod
    def configure(self, given: dict[str, Any], out: Path, stored: dict[str, Any] | None) -> Any:
        """The validated settings of a training (a `RunSettings`: ``train`` is the `TrainConfig`);
        writes nothing. ``given``: the options (``"data"`` among them); ``stored``: on a resume
        the run's ``config.json``, whose settings are kept (``given`` may change budgets only).
        """

    @abstractmethod
    def prepare(self, config: Any, log: Log) -> Prepared:
        """Read the data and build what training needs, in memory (rank 0 of a fresh run)."""

    def save(self, prepared: Prepared, out: Path) -> None:
        """Write the prepared pipeline files into the claimed run folder (rank 0):
        ``prepared.files`` (`attnkit.fileio.write_files`)."""
        write_files(out, prepared.files)

    @abstractmethod
    def reload(self, config: Any, out: Path, log: Log) -> Prepared:
        """What training needs, from the run folder's files and the data (a resume; the other
        ranks of a fresh run, after rank 0 saved)."""

    @abstractmethod
    def fit(self, prepared: Prepared, out: Path, *, resume: bool, log: Log) -> TrainResult:
        """Build the model (the base has seeded) and train it into ``out``."""

    @abstractmethod
    def load(self, run: str | os.PathLike, *, weights: str = "best", device: str | None = None,
             engine: str | None = None) -> Loaded:
        """A trained run, ready to evaluate and predict."""

    @abstractmethod
    def evaluation(self, loaded: Loaded, data: Any, *, report: int, **options: Any) -> Evaluation:
        """The metrics of ``loaded`` on ``data`` (None: the run's own test split), and with
        ``report > 0`` the report page of that many examples."""

    @abstractmethod
    def predictions(self, loaded: Loaded, inputs: Sequence[Any], **options: Any
                    ) -> list[Prediction]:
        """One prediction, with its attention, per input."""

    @abstractmethod
    def tiny(self, folder: Path) -> TinyRun:
        """A run that trains in seconds (its data written into ``folder`` if it needs files)
        and a few inputs to predict on: the contract test trains it for every app."""

    # ------------------------------------------------------------------ optional hooks
    def has_test_split(self, loaded: Loaded) -> bool:
        """Whether the run has its own test data (training then scores it)."""
        return True

    def after_training(self, loaded: Loaded, metrics: dict[str, Any], log: Log) -> None:
        """What the app shows once a run has its test metrics (figures, examples); nothing
        by default."""

    # ------------------------------------------------------------------ the shared flow
    def train(self, settings: Mapping[str, Any] | str | os.PathLike | None = None,
              out: str | os.PathLike | None = None, *, resume: bool = False,
              overwrite: bool = False, log: Log = stderr_log, threads: int | None = None,
              **overrides: Any) -> Run:
        """Train a run into ``out``, then score its test split into ``test_metrics.json``.

        Args:
            settings: the options (``{"data": ..., "epochs": ...}``) or the data alone (None: the
                app's default, on a resume the run's); on a resume they may only change budgets.
            resume: continue the interrupted run in ``out`` with its stored settings.
            overwrite: replace the run already in ``out``.
            log: where progress lines go (rank 0 only).
            threads: torch CPU threads while it trains. None: a resume's own (so it computes as
                the uninterrupted run), else the app's ``default_threads["train"]``.
            **overrides: more options, over ``settings`` (``train("synthetic", out, epochs=2)``).

        Returns:
            The `Run`; one stopped by a signal returns at once (no test evaluation).

        Raises:
            UsageError: an unknown setting, a bad value, a resume that would change the run.
            CheckpointError: ``out`` holds a run (without overwrite/resume), or is locked.
            DataError: unreadable data.
        """
        if out is None:
            raise UsageError("give the run folder (--out RUN)")
        if resume and overwrite:
            raise UsageError("--resume and --overwrite contradict each other; give one")
        out, main = Path(out), distributed.is_main_process()
        log = log if main else quiet
        stored = read_config(run_folder.check_resumable(out), self.name) if resume else None
        given = dict(settings) if isinstance(settings, Mapping) else {"data": settings}
        config = self.configure({**given, **overrides}, out, stored)
        trained_with = run_folder.stored_threads(stored) if stored is not None else None
        if threads is None:
            threads = trained_with or self.default_threads.get("train")
        elif trained_with is not None and threads != trained_with and main:
            warnings.warn(f"{out} trained with {trained_with} CPU thread(s) and resumes with "
                          f"{threads}: its weights will not be bit-identical to an "
                          f"uninterrupted run's (leave out --threads to keep {trained_with})",
                          stacklevel=2)
        with torch_threads(threads):
            try:
                return self._train(config, out, resume=resume, overwrite=overwrite, log=log)
            except Interrupted as exc:
                # Before the trainer's first checkpoint a resume has nothing to resume: say
                # what the folder allows, in the words the next command will use.
                exc.hint = run_folder.next_step(out)
                raise

    def _train(self, config: Any, out: Path, *, resume: bool, overwrite: bool, log: Log) -> Run:
        """`train` once the settings are known and the threads set."""
        main = distributed.is_main_process()
        info = distributed.setup(config.train.device)   # before preparation: rank 0 prepares alone
        try:
            with ExitStack() as claimed:
                prepared = self._prepared(config, out, info, claimed, resume=resume,
                                          overwrite=overwrite, log=log)
                seed_everything(prepared.train.seed)  # before the model: it fixes the weights
                with interruptible():
                    result = self.fit(prepared, out, resume=resume, log=log)
        finally:
            distributed.teardown(info)
        run = Run(out, self.name, result, select_metric=prepared.train.select_metric)
        if result.stop_reason == "signal" or not main:
            return run
        if result.finished_before and (out / TEST_METRICS).is_file():
            log(f"{out} had already finished ({result.stop_reason} after "
                f"{result.global_step} steps, {result.epoch} of {prepared.train.epochs} "
                "epochs): nothing to train; give --epochs with more epochs to go on")
            run.test_metrics = read_json(out / TEST_METRICS, "the run's test metrics", root=out)
            return run
        with interruptible():
            run.test_metrics = self._final_evaluation(run, prepared, log)
        return run

    def _prepared(self, config: Any, out: Path, info: distributed.DistInfo,
                  claimed: ExitStack, *, resume: bool, overwrite: bool, log: Log) -> Prepared:
        """Rank 0 claims the folder (the lock stays in ``claimed``); a new run is prepared and
        saved by rank 0 (the others then reload it); a resume is reloaded by every rank before
        any write.
        """
        def claim() -> Prepared | None:
            if not resume:
                run_folder.check_new_run(out, overwrite=overwrite)
                prepared = self.prepare(config, log)   # reads the data: before any write
            claimed.enter_context(run_folder.claim_run(out, resume=resume, overwrite=overwrite))
            if resume:   # again under the lock: the folder may have changed since the check
                read_config(out, self.name)
                return None
            self.save(prepared, out)
            return prepared

        if resume:
            prepared = self.reload(config, out, log)   # a broken file stops it here
            distributed.run_on_main(info, claim)
            return prepared
        prepared = distributed.run_on_main(info, claim)
        return prepared if prepared is not None else self.reload(config, out, log)

    def _final_evaluation(self, run: Run, prepared: Prepared, log: Log) -> dict | None:
        """The best weights scored on the test split into ``test_metrics.json`` with how the
        run ended (None: the app has no test split)."""
        loaded = self.load(run.path, device=str(distributed.resolve_device(prepared.train.device)))
        if not self.has_test_split(loaded):
            return None
        log(f"{FINAL_EVALUATION} of {run.path}...")   # it may outlast training's last minutes
        start = time.monotonic()
        metrics = self.evaluation(loaded, None, report=0).metrics
        log(f"{FINAL_EVALUATION}: {time.monotonic() - start:.0f} s")
        metrics.update({"stop_reason": run.stop_reason,
                        "train_seconds": round(run.result.elapsed, 1),
                        f"best_valid_{prepared.train.select_metric}": run.best_metric,
                        "run": str(run.path)})
        write_json(run.path / TEST_METRICS, metrics)
        self.after_training(loaded, metrics, log)
        return metrics

    def evaluate(self, run: Loaded | str | os.PathLike, data: Any = None, *,
                 report: str | os.PathLike | None = None, examples: int | None = None,
                 device: str | None = None, engine: str | None = None,
                 **options: Any) -> dict[str, Any]:
        """The metrics of ``run`` (a `Loaded` or a folder) on ``data``; None: its own test
        split, also written to ``test_metrics.json`` (or beside it: `write_test_metrics`).
        ``report``: also write the report page there, with ``examples`` examples;
        ``**options``: the app's own.
        """
        loaded = self._loaded(run, device=device, engine=engine)
        if report is not None:
            report = output_file(report, REPORT)
        shown = 0 if report is None else (-1 if examples is None else max(examples, 0))
        result = self.evaluation(loaded, data, report=shown, **options)
        if data is None and loaded.trained_here:
            write_test_metrics(loaded.path, result.metrics, self.evaluation_keys)
        if report is not None and result.page is not None:
            write_output(report, REPORT, result.page)
        return result.metrics

    def predict(self, run: Loaded | str | os.PathLike, inputs: Sequence[Any], *,
                device: str | None = None, engine: str | None = None,
                **options: Any) -> list[Prediction]:
        """Predictions of a run (a `Loaded` run, or a folder loaded with ``device`` and
        ``engine``) for ``inputs``, each with its attention; ``options`` are the app's."""
        return self.predictions(self._loaded(run, device=device, engine=engine),
                                self.checked_inputs(inputs), **options)

    def checked_inputs(self, inputs: Sequence[Any], what: str = "predict") -> list[Any]:
        """``inputs`` as a list, checked once for every app: one string (not a list of them)
        or none at all is a UsageError."""
        if isinstance(inputs, (str, bytes)):
            raise UsageError(f"{what} takes a list of {self.inputs}s, not one string")
        if not len(inputs):
            raise UsageError(f"no {self.inputs} given: nothing to {what}")
        return list(inputs)

    def page(self, predictions: Sequence[Prediction], summary: dict[str, Any]) -> str:
        """The app's explorer page of ``predictions`` (self-contained HTML)."""
        if not predictions:
            raise UsageError("nothing to show: no predictions")
        return type(predictions[0]).page(predictions, summary)

    def _loaded(self, run: Loaded | str | os.PathLike, *, device: str | None,
                engine: str | None) -> Loaded:
        if isinstance(run, Loaded):
            if run.app != self.name:
                raise UsageError(f"a {run.app} run given to the {self.name} app")
            return run
        return self.load(run, device=device, engine=engine)
