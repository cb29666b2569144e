"""The App contract, one test for every registered app: the three built-in apps and the example
app of ``examples/reverse_app`` (registered here as an installed package would be: an
``attnkit.apps`` entry point in a ``.dist-info`` folder on ``sys.path``).

Each app defines every step in its own class; it trains its own tiny run (``App.tiny``), then:
load -> evaluate writes ``test_metrics.json`` -> predict with ``attention=True`` returns
predictions that each carry attention rows, finite and summing to one -> the page renders ->
the run-folder rules hold (no silent overwrite, overwrite, resume of a finished run trains
nothing, the same seed gives the same weights, another seed others). A new app passes or fails
here without a line of its own."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from attnkit.apps import APPS, App, Loaded, Prediction, Run
from attnkit.apps.prediction import write_page
from attnkit.errors import CheckpointError, UsageError
from attnkit.machine import torch_threads

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "reverse_app"


def install_entry_point(folder: Path) -> Path:
    """A ``.dist-info`` folder declaring the example app's entry point, as pip would write."""
    info = folder / "attnkit_reverse-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: attnkit-reverse\n"
                                   "Version: 0.1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[attnkit.apps]\nreverse = attnkit_reverse:APP\n",
                                           encoding="utf-8")
    return folder


@pytest.fixture(scope="module", autouse=True)
def example_app_installed(tmp_path_factory):
    site = install_entry_point(tmp_path_factory.mktemp("site"))
    sys.path[:0] = [str(site), str(EXAMPLE)]
    yield site
    for entry in (str(site), str(EXAMPLE)):
        sys.path.remove(entry)


APP_NAMES = ["translate", "sentiment", "caption", "reverse"]


# The steps an app writes (`App`'s abstract methods and ``tiny``); the base class runs them.
STEPS = ("configure", "prepare", "reload", "fit", "load", "evaluation", "predictions", "tiny")


def test_every_app_defines_each_step_in_its_own_class():
    """No step is left to `App` (abstract there) or taken from anywhere but the app's class
    (or a base class of its own): each is visible where the app is written."""
    assert set(APP_NAMES) <= set(APPS.names())
    for name in APP_NAMES:
        app = APPS[name]
        assert app.name == name and not inspect.isabstract(type(app))
        for step in STEPS:
            owner = next(k for k in type(app).__mro__ if step in vars(k))
            assert owner is not App and issubclass(owner, App), (name, step, owner)


def test_a_class_statement_names_only_steps():
    def fit(prepared, out, *, resume, log):
        raise AssertionError("never called")

    class Named(App, fit=fit):
        name = "named"

    assert vars(Named)["fit"].__func__ is fit
    with pytest.raises(TypeError, match="Typo: not a step of an App: fitt"):
        class Typo(App, fitt=fit):
            name = "typo"


def attention_rows(p: Prediction) -> np.ndarray | None:
    """A prediction's attention as ``[rows, positions]``: one distribution per output."""
    if p.weights is None:
        return None
    w = np.asarray(p.weights)
    return w.reshape(w.shape[0], int(np.prod(w.shape[1:]))) if w.ndim > 1 else w[None, :]


def weights(run: Path) -> dict[str, np.ndarray]:
    return load_file(str(run / "best.safetensors"))


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


TRAIN_THREADS = 1  # every tiny run of this module trains at this thread count


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """name -> (app, tiny run, its folder, the Run): each app trained once for the module."""
    runs = {}
    with torch_threads(TRAIN_THREADS):
        for name in APP_NAMES:
            app = APPS[name]
            folder = tmp_path_factory.mktemp(name)
            tiny = app.tiny(folder)
            runs[name] = (app, tiny, folder / "run",
                          app.train(tiny.settings, folder / "run", log=lambda _: None))
    return runs


@pytest.mark.parametrize("name", APP_NAMES)
def test_train_load_evaluate_predict_page(trained, name, tmp_path):
    app, tiny, out, run = trained[name]
    assert isinstance(run, Run) and run.stop_reason == "completed" and run.app == name
    for file in ("config.json", "metrics.jsonl", "train.log", "best.safetensors", "last"):
        assert (out / file).exists(), file
    loaded = app.load(out)
    assert isinstance(loaded, Loaded) and not loaded.model.training and loaded.app == name

    (out / "test_metrics.json").unlink(missing_ok=True)
    metrics = app.evaluate(loaded)
    stored = json.loads((out / "test_metrics.json").read_text(encoding="utf-8"))
    assert metrics and {k: stored[k] for k in metrics if k in stored} == json.loads(
        json.dumps({k: v for k, v in metrics.items() if k in stored}))

    with pytest.raises(UsageError, match=f"no {app.inputs} given"):
        app.predict(loaded, [])
    preds = app.predict(loaded, tiny.inputs, attention=True)
    assert len(preds) == len(tiny.inputs)
    for p in preds:
        assert isinstance(p, Prediction)
        rows = attention_rows(p)   # asked for: every prediction carries its attention
        assert rows is not None and rows.ndim == 2 and rows.shape[1] >= 1
        assert np.isfinite(rows).all() and (rows >= 0).all()
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-4)
        assert json.loads(json.dumps(p.to_dict())) and isinstance(p.text_line(), str)
    assert sum(attention_rows(p).shape[0] for p in preds) > 0   # some output attended
    html = app.page(preds, loaded.summary())
    assert html.lstrip().lower().startswith("<!doctype html") and "attnkit-data" in html
    assert write_page(preds, tmp_path / "page.html", loaded.summary()).is_file()


@pytest.mark.parametrize("name", APP_NAMES)
def test_run_folder_rules_and_seeds(trained, name, tmp_path):
    app, tiny, out, _ = trained[name]
    quiet = {"log": lambda _: None}
    with pytest.raises(CheckpointError, match="already holds a run"):
        app.train(tiny.settings, out, **quiet)
    # A finished run resumed without more epochs trains nothing.
    before = (out / "best.safetensors").stat().st_mtime_ns
    again = app.train({}, out, resume=True, **quiet)
    assert again.result.finished_before and again.global_step == trained[name][3].global_step
    assert (out / "best.safetensors").stat().st_mtime_ns == before
    # The guarantee (docs/guide/options.md): the same seed on the same machine at the same
    # thread count gives the same weights, bf16 autocast included; another seed, other ones.
    # (Another thread count may change the last bits: on Intel AMX the caption app's
    # convolutions split their sums by thread, in float32 and in bf16 alike.)
    with torch_threads(TRAIN_THREADS):
        twin = app.train(tiny.settings, tmp_path / "twin", **quiet)
        assert twin.stop_reason == "completed" and same(weights(out), weights(tmp_path / "twin"))
        app.train({**tiny.settings, "seed": 1}, tmp_path / "twin", overwrite=True, **quiet)
        assert not same(weights(out), weights(tmp_path / "twin"))


def test_the_example_app_gets_the_command_line_from_its_entry_point(example_app_installed,
                                                                      tmp_path):
    """``attnkit reverse train / eval / predict --html`` with no change to attnkit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(example_app_installed), str(EXAMPLE), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1"}

    def attnkit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "attnkit.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=300)

    run = tmp_path / "rev"
    done = attnkit("reverse", "train", "--out", str(run), "--num-train", "200", "--length",
                   "5", "--epochs", "2", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert f"run: {run}  stop: completed" in done.stdout
    done = attnkit("reverse", "eval", "--run", str(run), "--json")
    assert done.returncode == 0 and "accuracy" in json.loads(done.stdout.splitlines()[-1])
    page = tmp_path / "rev.html"
    done = attnkit("reverse", "predict", "--run", str(run), "1 2 3", "--html", str(page))
    assert done.returncode == 0 and len(done.stdout.split()) >= 1 and page.is_file()
    assert "reverse" in attnkit("--help").stdout


def test_the_example_app_refuses_sequences_longer_than_it_learnt(trained):
    """A 12-digit input to a run trained on at most 5 digits: one clear error, not a shorter
    answer given as its reversal (the model stops after about as many digits as it saw)."""
    app, tiny, out, _ = trained["reverse"]
    loaded = app.load(out)
    assert len(app.predict(loaded, ["1 2 3 4 5"])) == 1   # as long as it learnt: answered
    with pytest.raises(UsageError, match=r"sequence 2 has 12 digits; this run learnt "
                                         r"sequences of at most 5 \(train with --length 12"):
        app.predict(loaded, ["1 2 3", " ".join("123456789012")])
