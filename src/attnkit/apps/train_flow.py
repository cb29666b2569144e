"""The two parts of `attnkit.apps.base.App.train` around the app's own ``fit``: the run
folder claimed and the data prepared (rank 0 alone for a new run; every rank reads a resume),
and the final evaluation of the best weights into ``test_metrics.json``.

Example:
    ```python
    with ExitStack() as claimed:
        prepared = prepared_run(app, config, out, info, claimed, resume=False,
                                overwrite=False, log=print)
    ```
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnkit.apps.results import FINAL_EVALUATION, TEST_METRICS, Log, Prepared, Run
from attnkit.apps.run_files import read_config
from attnkit.fileio import write_json
from attnkit.training import distributed as D
from attnkit.training.run_folder import check_new_run, claim_run

if TYPE_CHECKING:
    from attnkit.apps.base import App


def prepared_run(app: App, config: Any, out: Path, info: D.DistInfo, claimed: ExitStack, *,
                 resume: bool, overwrite: bool, log: Log) -> Prepared:
    """Rank 0 validates and claims the run folder (the lock stays in ``claimed``); a new run
    is prepared and saved by rank 0 alone (every other rank waits for it, a failure there
    stops them too, then reads what it saved); a resume is read by every rank before anything
    is written."""
    def claim(prepare: bool) -> Prepared | None:
        prepared = None
        if prepare:
            check_new_run(out, overwrite=overwrite)
            prepared = app.prepare(config, log)   # reads the data: before any write
        claimed.enter_context(claim_run(out, resume=resume, overwrite=overwrite))
        if resume:   # again under the lock: the folder may have changed since the check
            read_config(out, app.name)
        if prepared is not None:
            app.save(prepared, out)
        return prepared

    if resume:
        prepared = app.reload(config, out, log)   # a broken file stops it here
        D.run_on_main(info, lambda: claim(prepare=False))
        return prepared
    prepared = D.run_on_main(info, lambda: claim(prepare=True))
    return prepared if prepared is not None else app.reload(config, out, log)


def final_evaluation(app: App, run: Run, prepared: Prepared, log: Log) -> dict | None:
    """The app's evaluation of the run's best weights on its test split, with how the run
    ended, written to ``test_metrics.json`` (None: the app has no test split)."""
    loaded = app.load(run.path, device=str(D.resolve_device(prepared.train.device)))
    if not app.has_test_split(loaded):
        return None
    # Said, and timed: it can take longer than the last minutes of training did.
    log(f"{FINAL_EVALUATION} of {run.path}...")
    start = time.monotonic()
    metrics = app.evaluation(loaded, None, report=0).metrics
    log(f"{FINAL_EVALUATION}: {time.monotonic() - start:.0f} s")
    metrics.update({"stop_reason": run.stop_reason,
                    "train_seconds": round(run.result.elapsed, 1),
                    f"best_valid_{prepared.train.select_metric}": run.best_metric,
                    "run": str(run.path)})
    write_json(run.path / TEST_METRICS, metrics)
    app.after_training(loaded, metrics, log)
    return metrics
