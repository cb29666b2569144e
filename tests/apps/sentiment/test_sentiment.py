"""The sentiment app end to end on small synthetic review sets written by the tests."""

from __future__ import annotations

import gzip
import json
import random
import shutil

import numpy as np
import pytest
import torch

from attnkit.apps import Loaded
from attnkit.apps.run_files import FORMAT, read_config
from attnkit.apps.sentiment import (
    SentimentPrediction,
    evaluate,
    load_run,
    predict,
    train,
)
from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import write_json
from attnkit.training.checkpoint import load_tensors

POS = ["great", "wonderful", "superb", "loved", "brilliant"]
NEG = ["awful", "boring", "terrible", "hated", "dreadful"]
FILLER = "the a movie film plot actor scene was is and it of this that with".split()
# A small model and few steps: what the run-folder tests need, in a second or two.
TINY = {"num_words": 60, "maxlen": 16, "epochs": 1, "batch_size": 32, "progress": False,
        "device": "cpu", "model_overrides": {"embed_dim": 16, "num_heads": 2, "head_dim": 8}}


def write_reviews(folder, n_train=600, n_test=200, seed=0, chinese=False, splits=True):
    """``train.jsonl.gz`` / ``test.jsonl.gz`` (or one ``reviews.jsonl`` when not ``splits``):
    filler words plus one sentiment word each. Returns the data path."""
    rng = random.Random(seed)
    pos, neg, filler = POS, NEG, FILLER
    if chinese:
        pos, neg = ["好看", "精彩", "感人"], ["难看", "无聊", "糟糕"]
        filler = list("这部电影的剧情演员画面我们")
    folder.mkdir(parents=True, exist_ok=True)
    files = (("train", n_train), ("test", n_test)) if splits else (("reviews", n_train),)
    for split, n in files:
        opener = gzip.open(folder / f"{split}.jsonl.gz", "wt", encoding="utf-8") if splits \
            else open(folder / f"{split}.jsonl", "w", encoding="utf-8")
        with opener as f:
            for _ in range(n):
                y = rng.randint(0, 1)
                words = [rng.choice(filler) for _ in range(rng.randint(4, 20))]
                words.insert(rng.randrange(len(words) + 1), rng.choice(pos if y else neg))
                text = ("" if chinese else " ").join(words)
                f.write(json.dumps({"text": text, "label": "pos" if y else "neg"},
                                   ensure_ascii=False) + "\n")
    return folder if splits else folder / "reviews.jsonl"


def snapshot(folder):
    """Every file under ``folder`` with its bytes and mtime."""
    return {p.relative_to(folder): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def best_tensors(run):
    return load_tensors(run / "best.safetensors")[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = write_reviews(tmp_path_factory.mktemp("data") / "imdb")
    out = tmp_path_factory.mktemp("runs") / "r"
    result = train(data, out, preset="keras2018", num_words=100, maxlen=24, epochs=6, lr=5e-3,
                   progress=False, device="cpu")
    return data, out, result


@pytest.fixture(scope="module")
def single_file_runs(tmp_path_factory):
    """Three tiny runs on one file without a test split: seed 0 twice, seed 1 once."""
    root = tmp_path_factory.mktemp("seeds")
    data = write_reviews(root / "data", n_train=300, splits=False)
    outs = [root / name for name in ("a", "b", "c")]
    for out, seed in zip(outs, (0, 0, 1), strict=True):
        train(data, out, seed=seed, **TINY)
    return data, outs


def test_train_writes_a_run_and_learns(run):
    data, out, result = run
    for name in ("config.json", "metrics.jsonl", "best.safetensors", "vocab.json",
                 "pipeline.json", "model.json", "test_metrics.json"):
        assert (out / name).is_file(), name
    assert result.best_metric > 0.9
    test = json.loads((out / "test_metrics.json").read_text())
    assert test["accuracy"] > 0.9 and test["examples"] == 200
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("val_test_accuracy" in e or "test_accuracy" in e for e in evals)
    assert evaluate(out, data)["accuracy"] == pytest.approx(test["accuracy"])


def test_config_records_every_setting(run):
    data, out, _ = run
    config = read_config(out, "sentiment")
    assert config["format"] == FORMAT and config["app"] == "sentiment"
    expected = {"preset": "keras2018", "data": str(data), "test_data": str(data),
                "valid_fraction": 0.1, "tokenizer": "word", "num_words": 100, "maxlen": 24,
                "padding": "pre", "mask_padding": True, "skip_bad": False, "track_test": True}
    assert {k: config[k] for k in expected} == expected
    assert config["train"]["seed"] == 0 and config["train"]["epochs"] == 6


def test_evaluate_defaults_to_the_runs_own_test_split(run, single_file_runs):
    data, out, _ = run
    assert evaluate(out) == evaluate(out, data)
    assert evaluate(out)["truncated"] == 0  # at most 21 words, maxlen 24
    reviews, outs = single_file_runs
    with pytest.raises(UsageError, match="--data"):
        evaluate(outs[0])
    # maxlen 16: the reviews of 17 to 21 words are cut, and counted.
    lengths = [len(json.loads(x)["text"].split()) for x in reviews.read_text().splitlines()]
    assert evaluate(outs[0], reviews, split="train")["truncated"] == sum(n > 16 for n in lengths)


def test_predict_weights_spans_and_sentiment_word(run):
    _, out, _ = run
    text = "The plot was SUPERB, and the film of this"
    preds = predict(out, [text, "this movie was awful"])
    assert isinstance(preds[0], SentimentPrediction)
    assert preds[0].prob > 0.5 > preds[1].prob
    assert (preds[0].label, preds[1].label) == ("positive", "negative")
    for p in preds:
        assert p.weights.shape == (len(p.tokens),)
        assert float(p.weights.sum()) == pytest.approx(1.0, abs=1e-5)
        assert p.unknown == 0.0 and p.truncated == 0
    assert preds[0].tokens[int(np.argmax(preds[0].weights))] == "superb"
    # Signed contributions: the sentiment word pushes each verdict its way, and they add up to
    # the logit (less the classifier's bias).
    bias = float(load_run(out).model.classifier.bias.detach())
    for p, word, sign in ((preds[0], "superb", 1), (preds[1], "awful", -1)):
        assert p.contributions.shape == p.weights.shape
        assert sign * p.contributions[p.tokens.index(word)] > 0
        logit = np.log(p.prob / (1 - p.prob))
        assert float(p.contributions.sum()) == pytest.approx(logit - bias, abs=1e-3)
    assert [text[a:b] for a, b in preds[0].spans] == ["The", "plot", "was", "SUPERB", "and",
                                                      "the", "film", "of", "this"]
    row = preds[0].to_dict()
    assert json.loads(json.dumps(row))["weights"] == pytest.approx(list(preds[0].weights))


def test_predict_reports_what_the_model_could_not_read(run):
    _, out, _ = run
    long = " ".join(["the"] * 30 + ["superb"])
    unread, cut, zh = predict(out, ["zorgle blib superb film", long, "这部电影很精彩"])
    assert unread.unknown == pytest.approx(0.5) and unread.truncated == 0
    assert cut.truncated == 31 - 24 and len(cut.tokens) == 24 and cut.tokens[-1] == "superb"
    # The word tokenizer reads an unspaced Chinese review as one word it never saw.
    assert zh.tokens == ["这部电影很精彩"] and zh.unknown == 1.0


@pytest.mark.parametrize("reviews, empty", [(["good", ""], [False, True]),
                                             (["   "], [True]),
                                             (["fine", "!!! ..."], [False, True])])
def test_a_review_without_a_token_is_marked_empty_not_an_abort(run, reviews, empty):
    preds = predict(run[1], reviews)
    assert [p.empty for p in preds] == empty
    for p in preds:
        if p.empty:
            assert p.label == "empty" and p.prob is None and p.tokens == []
            assert "nothing predicted" in p.note() and json.dumps(p.to_dict())
        else:
            assert 0 <= p.prob <= 1


def test_predict_takes_a_list_of_reviews(run):
    with pytest.raises(UsageError, match="list"):
        predict(run[1], "superb film")


def test_load_run_is_eval_mode(run):
    loaded = load_run(run[1])
    assert isinstance(loaded, Loaded) and loaded.app == "sentiment"
    assert not loaded.model.training and loaded.pipeline.maxlen == 24
    assert loaded.config["num_words"] == 100 and loaded.summary()["parameters"] > 0


def test_prediction_renders_figure_and_page(run, tmp_path):
    pred = predict(run[1], ["the film was superb"])[0]
    assert pred.render(tmp_path / "p.png").stat().st_size > 0
    page = pred.render(tmp_path / "p.html", {"run": "r"}).read_text(encoding="utf-8")
    # The explorer page: the review in its data block, both views, no network.
    assert "superb" in page and "push towards positive" in page and "pooling weight" in page
    assert "http" not in page.split("<body", 1)[1]


def test_same_seed_same_weights_other_seed_other_weights(single_file_runs):
    _, (a, b, c) = single_file_runs
    wa, wb, wc = best_tensors(a), best_tensors(b), best_tensors(c)
    assert wa.keys() == wb.keys() == wc.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)


@pytest.mark.parametrize("overrides, message", [
    ({"nonsense": 1}, "unknown sentiment option"),
    ({"preset": "bogus"}, "--preset"),
    ({"valid_fraction": 0.0001}, "empty training or validation split"),
    ({"valid_fraction": 1.5}, "--valid-fraction"),
    ({"num_words": 1}, "--num-words"),
    ({"maxlen": 0}, "--maxlen"),
    ({"epochs": 0}, "--epochs"),
    ({"tokenizer": "bpe"}, "--tokenizer"),
    ({"model_overrides": {"embed_dim": -4}}, "embed_dim"),
    ({"model_overrides": {"width": 4}}, "unknown model override"),
    ({"device": "tpu"}, "device"),
])
def test_bad_options_are_usage_errors_and_write_nothing(tmp_path, overrides, message):
    data = write_reviews(tmp_path / "data", n_train=100, splits=False)
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=message):
        train(data, out, **{**TINY, **overrides})
    assert not out.exists()


def test_resume_keeps_the_stored_seed_and_applies_the_budget(tmp_path):
    data = write_reviews(tmp_path / "data", n_train=200, splits=False)
    out = tmp_path / "run"
    train(data, out, seed=3, **TINY)
    result = train(None, out, resume=True, epochs=2, max_minutes=30, progress=False)
    config = read_config(out, "sentiment")
    assert config["train"]["seed"] == 3
    assert config["train"]["epochs"] == 2 and config["train"]["max_minutes"] == 30
    assert result.epoch == 2
    evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in evals if e["kind"] == "eval"] == [0, 1]


def test_a_failing_resume_writes_nothing(tmp_path):
    data = write_reviews(tmp_path / "data", n_train=200, splits=False)
    other = write_reviews(tmp_path / "other", n_train=200, seed=5, splits=False)
    out = tmp_path / "run"
    train(data, out, seed=3, **TINY)
    before = snapshot(out)
    refused = [({"seed": 4}, "--seed 4 differs"), ({"num_words": 61}, "--num-words"),
               ({"maxlen": 8}, "--maxlen"), ({"tokenizer": "char"}, "--tokenizer"),
               ({"preset": "best"}, "--preset"), ({"lr": 0.5}, "--lr"),
               ({"model_overrides": {"embed_dim": 32}}, "embed-dim")]
    for overrides, message in refused:
        with pytest.raises(UsageError, match=message):
            train(None, out, resume=True, **overrides)
    with pytest.raises(UsageError, match="--data"):
        train(other, out, resume=True)
    with pytest.raises(UsageError, match="contradict"):
        train(None, out, resume=True, overwrite=True)
    assert snapshot(out) == before
    (out / "model.json").write_text("{")
    before = snapshot(out)
    with pytest.raises(CheckpointError, match="model.json"):
        train(None, out, resume=True)
    assert snapshot(out) == before
    shutil.rmtree(out / "last")
    before = snapshot(out)
    with pytest.raises(CheckpointError, match="nothing to resume"):
        train(data, out, resume=True)
    assert snapshot(out) == before


def test_a_trained_run_is_never_replaced_without_overwrite(tmp_path):
    data = write_reviews(tmp_path / "data", n_train=200, splits=False)
    out = tmp_path / "run"
    train(data, out, seed=3, **TINY)
    before = snapshot(out)
    with pytest.raises(CheckpointError, match="already holds a run"):
        train(data, out, seed=4, **TINY)
    assert snapshot(out) == before
    train(data, out, seed=4, overwrite=True, **TINY)
    assert read_config(out, "sentiment")["train"]["seed"] == 4


def _copy(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


@pytest.mark.parametrize("name", ["config.json", "model.json", "pipeline.json", "vocab.json"])
@pytest.mark.parametrize("content", [b'{"app": "sentiment",', b'\xff\xfe{"a": 1}'])
def test_broken_run_files_are_checkpoint_errors_naming_the_file(run, tmp_path, name, content):
    copy = _copy(run[1], tmp_path)
    (copy / name).write_bytes(content)
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        load_run(copy)


def test_a_run_of_another_app_is_refused(run, tmp_path):
    copy = _copy(run[1], tmp_path)
    write_json(copy / "config.json", {"app": "caption", "format": 2})
    with pytest.raises(CheckpointError, match="is a caption run, not a sentiment run"):
        predict(copy, ["superb"])


def test_chinese_reviews_with_char_tokenizer(tmp_path):
    data = write_reviews(tmp_path / "zh", n_train=400, n_test=100, chinese=True)
    train(data, tmp_path / "run", preset="keras2018", tokenizer="char", num_words=60,
          maxlen=32, epochs=5, lr=5e-3, progress=False, device="cpu")
    assert json.loads((tmp_path / "run" / "test_metrics.json").read_text())["accuracy"] > 0.85
    pred = predict(tmp_path / "run", ["这部电影很精彩"])[0]
    assert pred.tokens == list("这部电影很精彩") and pred.prob > 0.5
    assert [s for s in pred.spans] == [(i, i + 1) for i in range(7)]
