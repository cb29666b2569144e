"""The applications: translation, sentiment, captioning, and any app a package registers.

Every app keeps one contract (`App`, in `attnkit.apps.base`): ``train`` a run folder, ``load``
it, ``evaluate`` it (metrics, written to the run's ``test_metrics.json``), ``predict`` with it
(predictions that carry their attention), and show predictions on its explorer ``page``.
`APPS` maps each app's name to its `App`; ``attnkit.cli`` builds the ``attnkit APP ...``
commands from it.

Example:
    ```python
    from attnkit.apps import APPS

    app = APPS["translate"]
    run = app.train({"data": "synthetic", "epochs": 2}, "runs/demo")
    preds = app.predict(app.load("runs/demo"), ["I am cold."])
    ```

Each built-in app is also a package with the same four calls as functions:
``from attnkit.apps import translate; translate.train("synthetic", "runs/demo")``.
"""

from attnkit.apps.base import App
from attnkit.apps.prediction import Prediction
from attnkit.apps.registry import APPS
from attnkit.apps.results import Evaluation, Loaded, Prepared, Run, TinyRun

__all__ = ["APPS", "App", "Evaluation", "Loaded", "Prediction", "Prepared", "Run", "TinyRun"]
