"""The applications: translation, sentiment, captioning, and any app a package registers.
Every app keeps one contract (`App`, in `attnkit.apps.base`); `APPS` maps each name to its
`App`. Each built-in app is also a package with the same calls as functions
(``translate.train("synthetic", "runs/demo")``)."""

from attnkit.apps.base import App
from attnkit.apps.prediction import Prediction
from attnkit.apps.registry import APPS
from attnkit.apps.results import Evaluation, Loaded, Prepared, Run, TinyRun

__all__ = ["APPS", "App", "Evaluation", "Loaded", "Prediction", "Prepared", "Run", "TinyRun"]
