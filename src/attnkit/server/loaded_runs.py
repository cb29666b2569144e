"""The runs a server holds: each loaded once at start-up, and what ``/v1/models`` shows of it.

`load_runs` loads every ``--run`` before the server listens; the first that fails stops the
start with its one error line. A folder's app is the ``"app"`` its ``config.json`` (a training
run) or ``attnkit.json`` (a translate run's CTranslate2 export, run by that engine unless
``--engine`` says otherwise) declares.

Example:
    ```python
    runs = load_runs(ServeOptions(runs=[parse_run("fr=runs/fr")]))
    runs["fr"].info()["test_metrics"]["bleu"]
    ```
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnkit.apps import APPS, App, Loaded
from attnkit.apps.results import TEST_METRICS
from attnkit.apps.run_files import read_json_object
from attnkit.errors import CheckpointError, UsageError
from attnkit.server.options import RunSpec, ServeOptions

log = logging.getLogger("attnkit.server")
# What declares a folder's app: an export's settings first (it also holds CTranslate2's own
# config.json, which names no app), then a training run's config.
APP_FILES = (("attnkit.json", "ctranslate2"), ("config.json", None))


@dataclass
class ServedRun:
    """One loaded run: its name in requests, its `App`, the loaded run and its
    ``test_metrics.json`` (None: none, or unreadable)."""

    name: str
    app: App
    loaded: Loaded
    test_metrics: dict[str, Any] | None

    @property
    def streams(self) -> bool:
        """Whether ``/v1/translate/stream`` can run it (attnkit's engine of a translate run)."""
        return hasattr(self.app, "stream") and getattr(self.loaded.engine, "streams", False)

    def predict(self, inputs: list[Any], options: dict[str, Any]) -> list[Any]:
        return self.app.predict(self.loaded, inputs, **options)

    def open_stream(self, texts: list[str], options: dict[str, Any]) -> Iterator[Any]:
        return self.app.stream(self.loaded, texts, **options)

    def summary(self) -> dict[str, Any]:
        """The run's summary for pages, named by its name: no path of the server's disk."""
        out = self.loaded.summary()
        out["run"] = self.name
        if "data" in out and ("/" in out["data"] or os.sep in out["data"]):
            out["data"] = Path(out["data"]).name
        return out

    def info(self) -> dict[str, Any]:
        """What ``GET /v1/models`` shows of it."""
        engine = self.loaded.engine
        return {"name": self.name, "app": self.app.name, "inputs": self.app.inputs,
                "engine": getattr(engine, "name", None),
                "decoding": getattr(engine, "path", None), "streams": self.streams,
                "summary": self.summary(), "test_metrics": self.test_metrics}

    def compile(self, mode: str) -> None:
        """Compiled decoding for a run whose engine has it (`attnkit.server.options.COMPILE`):
        ``"on"`` now, ``"auto"`` in a thread of its own while the eager engine answers (the
        engine switches when it is ready, with a log line), ``"off"`` never."""
        build = getattr(self.loaded.engine, "compile", None)
        if build is None or mode == "off":
            return
        if mode == "on":
            build(log=log.info)
            return

        def background() -> None:
            if build(log=log.info):
                log.info("%s: decoding switched to the compiled engine", self.name)

        threading.Thread(target=background, name=f"compile {self.name}", daemon=True).start()


def app_of(folder: Path) -> tuple[str, str | None]:
    """The app a run folder declares, and the engine it needs (None: the app's default).

    Raises:
        CheckpointError: no such folder, or one that declares no app.
    """
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such run folder")
    for name, engine in APP_FILES:
        if (folder / name).exists():
            app = read_json_object(folder / name, "the run's settings", root=folder).get("app")
            if not isinstance(app, str):
                raise CheckpointError(f"{folder / name}: names no app")
            return app, engine
    raise CheckpointError(f"{folder}: not a run folder (no config.json)")


def check_run(spec: RunSpec, options: ServeOptions) -> tuple[App, str | None]:
    """The app of a ``--run`` and the engine to run it with, before anything is loaded.

    Raises:
        CheckpointError: not a run folder.
        UsageError: an app this attnkit does not have.
    """
    name, needed = app_of(spec.path)
    if name not in APPS.names():
        raise UsageError(f"{spec.path} is a run of the app {name!r}, which this attnkit does "
                         f"not have (apps: {', '.join(APPS.names())})")
    return APPS[name], options.engine or needed


def load_runs(options: ServeOptions) -> dict[str, ServedRun]:
    """Every ``--run``, loaded in order.

    Raises:
        CheckpointError: not a run folder, broken files (the first failure).
        UsageError: an app this attnkit does not have, an engine that cannot run it.
    """
    runs = {}
    for spec in options.runs:
        app, engine = check_run(spec, options)
        loaded = app.load(spec.path, device=options.device, engine=engine)
        runs[spec.name] = ServedRun(spec.name, app, loaded, _test_metrics(spec.path))
        log.info("loaded %s (%s): %s", spec.name, app.name, loaded.description)
        if options.compile == "on":
            runs[spec.name].compile("on")
    return runs


def _test_metrics(folder: Path) -> dict[str, Any] | None:
    if not (folder / TEST_METRICS).exists():
        return None
    try:
        metrics = read_json_object(folder / TEST_METRICS, "the run's test metrics", root=folder)
    except CheckpointError as exc:   # not part of the model: served without its scores
        log.warning("%s", exc)
        return None
    return {k: v for k, v in metrics.items() if k != "run"}   # a path of the trainer's disk
