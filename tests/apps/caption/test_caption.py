"""The caption app: a tiny run end to end, the run-folder contract (overwrite, resume, seeds,
old formats), predictions, bad images and bad options."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from attnkit.apps import Loaded
from attnkit.apps import caption as app
from attnkit.apps.prediction import write_page
from attnkit.apps.run_files import FORMAT
from attnkit.data.scenes import make_scenes
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.training.run_folder import RunLock

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": 16, "emb_dim": 16, "hidden": 32, "attention_units": 16}
# A run of a few steps at 32 px (4x4 feature map): well under a second.
TINY = {"num_train": 8, "num_valid": 2, "num_test": 2, "image_size": 32, "epochs": 1,
        "batch_size": 8, "device": "cpu", "progress": False, **SMALL}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("caption") / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # module fixtures come before the one_thread fixture
    try:
        result = app.train("synthetic", out, num_train=24, num_valid=6, num_test=6, epochs=1,
                           batch_size=8, device="cpu", progress=False, **SMALL)
    finally:
        torch.set_num_threads(before)
    assert result.stop_reason == "completed"
    return out


def snapshot(folder):
    """Every file and folder under ``folder`` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def weights(run):
    return load_file(run / "best.safetensors")


def test_run_folder_and_evaluate(run):
    for name in ("config.json", "vocab.json", "model.json", "metrics.jsonl",
                 "best.safetensors", "last"):
        assert (run / name).exists(), name
    config = json.loads((run / "config.json").read_text())
    assert config["app"] == "caption" and config["format"] == FORMAT
    assert config["data"] == "synthetic" and config["data_settings"]["num_train"] == 24
    metrics = app.evaluate(run)
    assert metrics["examples"] == 6 and 0 <= metrics["accuracy"] <= 1
    assert 0 <= metrics["bleu4"] <= 1 and metrics["grounded_words"] > 0
    assert 0 < metrics["uniform_mass"] < 1 and metrics["attention_supervision"] == 0.0
    # The app trains CaptionerConfig's defaults, and says which version wrote model.json.
    model_cfg = json.loads((run / "model.json").read_text())
    assert model_cfg["version"] == 2
    assert (model_cfg["init_pool"], model_cfg["global_context"]) == ("glimpse", True)
    assert app.evaluate(run, "synthetic", num_test=3)["examples"] == 3


def test_load_run_returns_the_run(run):
    loaded = app.load_run(run)
    assert isinstance(loaded, Loaded) and loaded.app == "caption" and not loaded.model.training
    assert loaded.pipeline.decode([loaded.pipeline.bos_id], strip_specials=False) == ["<bos>"]
    assert loaded.config["train"]["select_metric"] == "accuracy"
    assert loaded.summary()["data"] == "synthetic"
    assert app.evaluate(loaded) == app.evaluate(run)


def test_checkpoints_are_selected_by_accuracy_then_validation_loss(run):
    train_cfg = app.load_run(run).config["train"]
    assert (train_cfg["select_metric"], train_cfg["select_tiebreak"]) == ("accuracy", "loss")
    evals = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()
             if '"eval"' in s]
    assert evals and all("val_loss" in e and "val_accuracy" in e for e in evals)


def test_predict_renders_figure_and_page(run, tmp_path):
    scene = make_scenes(1, 99)[0]
    path = tmp_path / "ducks.png"
    Image.fromarray(scene.image).save(path)
    (pred,) = app.predict(run, path)
    assert isinstance(pred, app.CaptionPrediction) and pred.source == str(path)
    assert pred.weights.shape == (len(pred.words), 8, 8)
    assert pred.unknown == 0 and pred.truncated == 0 and pred.original_size == (64, 64)
    assert pred.note() is None
    record = json.loads(json.dumps(pred.to_dict()))
    assert record["caption"] == pred.caption and record["image"] == str(path)
    assert np.allclose(record["weights"], pred.weights, atol=1e-5)
    pred.render(tmp_path / "fig.png")
    with Image.open(tmp_path / "fig.png") as im:
        assert im.format == "PNG" and im.size[0] > 100
    write_page([pred], tmp_path / "r.html", app.load_run(run).summary())
    page = (tmp_path / "r.html").read_text()
    # The explorer page: the image inline, every word of the caption in its data block.
    assert "data:image/png;base64," in page and "http" not in page.split("<body", 1)[1]
    assert all(f'"{w}"' in page for w in pred.words)
    # Only attention is on the page: it names the method to trust, and how to add it.
    assert pred.order == ("attention",) and pred.shown == "attention"
    assert "Shown first: attention; integrated gradients is the method to trust here" in page
    assert "add it with --explain integrated-gradients" in page


def test_predict_takes_several_images_and_arrays(run, tmp_path):
    scenes = make_scenes(2, 5)
    paths = []
    for i, s in enumerate(scenes):
        paths.append(tmp_path / f"s{i}.png")
        Image.fromarray(s.image).save(paths[-1])
    both = app.predict(run, paths)
    assert [p.source for p in both] == [str(p) for p in paths]
    for pred, path in zip(both, paths, strict=True):
        (alone,) = app.predict(run, path)
        assert alone.words == pred.words
        np.testing.assert_allclose(alone.weights, pred.weights, atol=1e-6)
    (from_array,) = app.predict(run, scenes[0].image)
    assert from_array.source == "<array>" and from_array.words == both[0].words


@pytest.mark.parametrize("mode", ["L", "RGBA", "big"])
def test_predict_converts_odd_images(run, tmp_path, mode):
    scene = make_scenes(1, 3)[0]
    im = Image.fromarray(scene.image)
    im = im.resize((900, 700)) if mode == "big" else im.convert(mode)
    path = tmp_path / f"odd_{mode}.png"
    im.save(path)
    (pred,) = app.predict(run, path)
    assert pred.image.shape == (256, 256, 3) and pred.weights.shape[1:] == (8, 8)
    # Only the photo had to be resized to the model's 64 px: that is what truncated says.
    assert pred.truncated == (mode == "big")
    if mode == "big":
        assert pred.original_size == (900, 700)
        assert "resized from 900x700 to the model's 64x64" in pred.note()


def test_predict_bad_inputs_name_the_file(run, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    with pytest.raises(DataError, match="notes.png"):
        app.predict(run, bad)
    with pytest.raises(DataError, match="missing.jpg"):
        app.predict(run, [tmp_path / "missing.jpg"])
    with pytest.raises(CheckpointError, match="config.json is missing"):
        app.predict(tmp_path, bad)
    with pytest.raises(UsageError, match=r"uint8 \[H, W, 3\]"):
        app.predict(run, np.zeros((64, 64), np.uint8))
    with pytest.raises(UsageError, match="no image"):
        app.predict(run, [])


def test_eval_report_shows_metrics_grounding_and_examples(tmp_path):
    app.train("synthetic", tmp_path / "run", **TINY)  # 2 test scenes: 2 figures to draw
    metrics = app.evaluate(tmp_path / "run", report=tmp_path / "eval.html")
    page = (tmp_path / "eval.html").read_text()
    assert "attention grounding" in page and f"{metrics['bleu4']:.4f}" in page
    assert page.count("data:image/png;base64,") == metrics["examples"]


def test_supervised_run_records_its_weight(tmp_path):
    out = tmp_path / "sup"
    app.train("synthetic", out, attention_supervision=1.0, **TINY)
    assert json.loads((out / "config.json").read_text())["attention_supervision"] == 1.0
    assert app.evaluate(out)["attention_supervision"] == 1.0  # eval reports how it was trained
    with pytest.raises(UsageError, match="--attention-supervision must be a number >= 0"):
        app.train("synthetic", tmp_path / "bad", attention_supervision=-1.0)
    with pytest.raises(UsageError, match="needs synthetic data"):
        app.train("coco:c.json:images", tmp_path / "bad", attention_supervision=1.0)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("overrides, message", [
    ({"colour": 1}, "unknown caption option"),
    ({"image_size": 36}, "multiple of 8"),
    ({"num_train": 0}, "--num-train must be an integer >= 1"),
    ({"attention": "sharp"}, "attention must be one of"),
    ({"lr": -1.0}, "lr"),
    ({"device": "bogus"}, "unknown device"),
])
def test_bad_options_are_usage_errors_and_write_nothing(tmp_path, overrides, message):
    with pytest.raises(UsageError, match=message):
        app.train("synthetic", tmp_path / "run", **{**TINY, **overrides})
    assert not (tmp_path / "run").exists()


def test_bad_data_writes_nothing(tmp_path):
    with pytest.raises(DataError, match="image folder not found"):
        app.train(f"flickr:{tmp_path / 'tokens.txt'}:{tmp_path / 'nowhere'}", tmp_path / "run",
                  **TINY)
    assert not (tmp_path / "run").exists()


def test_seed_fixes_the_weights(tmp_path):
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        torch.rand(7)  # move the global RNG: the run must not depend on it
        app.train("synthetic", tmp_path / name, seed=seed, **TINY)
        runs[name] = weights(tmp_path / name)
    assert runs["a"].keys() == runs["b"].keys() == runs["c"].keys()
    for key, value in runs["a"].items():
        torch.testing.assert_close(value, runs["b"][key], rtol=0, atol=0, msg=key)
    assert any(not torch.equal(v, runs["c"][k]) for k, v in runs["a"].items())


def test_an_existing_run_is_replaced_only_with_overwrite(tmp_path):
    out = tmp_path / "run"
    app.train("synthetic", out, **TINY)
    before = snapshot(out)
    with pytest.raises(CheckpointError, match="already holds a run.*--overwrite"):
        app.train("synthetic", out, **TINY)
    assert snapshot(out) == before
    (out / "notes.txt").write_text("from the old run")
    app.train("synthetic", out, overwrite=True, **{**TINY, "seed": 1})
    assert not (out / "notes.txt").exists()
    assert json.loads((out / "config.json").read_text())["train"]["seed"] == 1
    with pytest.raises(UsageError, match="contradict"):
        app.train("synthetic", out, resume=True, overwrite=True)


def test_resume_keeps_the_stored_settings_and_applies_the_budget(tmp_path):
    out = tmp_path / "run"
    first = app.train("synthetic", out, **{**TINY, "seed": 3, "max_minutes": 9.0})
    result = app.train(None, out, resume=True, epochs=3, max_minutes=5.0)
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["seed"] == 3 and config["train"]["epochs"] == 3
    assert config["train"]["max_minutes"] == 5.0 and config["data_settings"]["num_train"] == 8
    assert result.stop_reason == "completed" and result.epoch == 3
    assert result.global_step == 3 * first.global_step
    # Given values equal to the stored ones are fine; None budget = no budget.
    app.train("synthetic", out, resume=True, seed=3, image_size=32, epochs=3,
              max_minutes=None)
    assert json.loads((out / "config.json").read_text())["train"]["max_minutes"] is None


@pytest.mark.parametrize("data, overrides, message", [
    (None, {"seed": 1}, "--seed 1 differs from the resumed run's 0"),
    (None, {"image_size": 64}, "--image-size 64 differs"),
    (None, {"attention": "hard"}, "--attention hard differs"),
    (None, {"hidden": 64}, "--hidden 64 differs"),
    ("coco:c.json:images", {}, "--data coco:c.json:images differs"),
    (None, {"colour": 2}, "unknown caption option"),
])
def test_a_refused_resume_writes_nothing(tmp_path, data, overrides, message):
    out = tmp_path / "run"
    app.train("synthetic", out, **TINY)
    before = snapshot(out)
    with pytest.raises(UsageError, match=message):
        app.train(data, out, resume=True, **overrides)
    assert snapshot(out) == before


def test_resume_needs_a_caption_run_with_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="nothing to resume"):
        app.train(None, tmp_path / "none", resume=True)
    other = tmp_path / "translate_run"
    (other / "last").mkdir(parents=True)
    (other / "config.json").write_text(json.dumps({"app": "translate", "format": 2}))
    with pytest.raises(CheckpointError, match="is a translate run, not a caption run"):
        app.train(None, other, resume=True)
    broken = tmp_path / "broken"
    (broken / "last").mkdir(parents=True)
    (broken / "config.json").write_text(json.dumps({"app": "caption", "format": 2}))
    with pytest.raises(CheckpointError, match="data settings"):
        app.train(None, broken, resume=True)


def test_a_locked_run_is_refused_naming_the_holder(tmp_path):
    import os

    out = tmp_path / "run"
    with RunLock(out):
        with pytest.raises(CheckpointError, match=f"PID {os.getpid()}"):
            app.train("synthetic", out, **TINY)
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


@pytest.mark.parametrize("damage, message", [
    ({"config.json": b"{not json"}, "not valid JSON"),
    ({"config.json": b'{"app": "caption\xff"}'}, "not UTF-8"),
    ({"config.json": b'{"app": "sentiment", "format": 2}'}, "is a sentiment run"),
    ({"model.json": b'{"vocab_size": 2}'}, "not a captioner config"),
    ({"vocab.json": b"[]"}, "vocabulary"),
    ({"best.safetensors": None}, "no best weights yet"),
])
def test_broken_runs_are_checkpoint_errors(tmp_path, damage, message):
    out = tmp_path / "run"
    app.train("synthetic", out, **TINY)
    for name, content in damage.items():
        if content is None:
            (out / name).unlink()
        else:
            (out / name).write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        app.load_run(out)


def _flickr(folder, n: int = 12) -> str:
    images = folder / "imgs"
    images.mkdir()
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (40, 30, 3), dtype=np.uint8)).save(
            images / f"{i}.jpg")
        lines += [f"{i}.jpg#0\tA dog runs.", f"{i}.jpg#1\tThe dog is running {i % 3}."]
    (folder / "tokens.txt").write_text("\n".join(lines) + "\n")
    return f"flickr:{folder / 'tokens.txt'}:{images}"


def test_real_data_run_selects_by_bleu(tmp_path):
    spec = _flickr(tmp_path)
    out = tmp_path / "run"
    app.train(spec, out, **{**TINY, "valid_fraction": 0.25})
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["select_metric"] == "bleu4" and config["data"] == spec
    metrics = app.evaluate(out)
    assert metrics["examples"] == 3 and 0 <= metrics["bleu4"] <= 1
    assert "grounding_mass" not in metrics  # photos have no boxes
    assert app.evaluate(out, spec)["examples"] == 3
