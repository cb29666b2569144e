"""The sentiment app end to end on a small synthetic review set written by the test."""

from __future__ import annotations

import gzip
import json
import random

import pytest
import torch

from attnkit.apps.sentiment import evaluate, load_run, predict, train

POS = ["great", "wonderful", "superb", "loved", "brilliant"]
NEG = ["awful", "boring", "terrible", "hated", "dreadful"]
FILLER = "the a movie film plot actor scene was is and it of this that with".split()


def write_reviews(folder, n_train=600, n_test=200, seed=0, chinese=False):
    """``train.jsonl.gz`` / ``test.jsonl.gz``: filler words plus one sentiment word each."""
    rng = random.Random(seed)
    pos, neg, filler = POS, NEG, FILLER
    if chinese:
        pos, neg = ["好看", "精彩", "感人"], ["难看", "无聊", "糟糕"]
        filler = list("这部电影的剧情演员画面我们")
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        with gzip.open(folder / f"{split}.jsonl.gz", "wt", encoding="utf-8") as f:
            for _ in range(n):
                y = rng.randint(0, 1)
                words = [rng.choice(filler) for _ in range(rng.randint(4, 20))]
                words.insert(rng.randrange(len(words) + 1), rng.choice(pos if y else neg))
                text = ("" if chinese else " ").join(words)
                f.write(json.dumps({"text": text, "label": "pos" if y else "neg"},
                                   ensure_ascii=False) + "\n")
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = write_reviews(tmp_path_factory.mktemp("data") / "imdb")
    out = tmp_path_factory.mktemp("runs") / "r"
    torch.manual_seed(0)
    result = train(data, out, preset="keras2018", num_words=100, maxlen=24, epochs=6, lr=5e-3,
                   progress=False, device="cpu")
    return data, out, result


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


def test_predict_scores_and_sentiment_word(run):
    _, out, _ = run
    preds = predict(out, ["the plot was superb and the film of this", "this movie was awful",
                          ""])
    assert preds[0].prob > 0.5 > preds[1].prob
    for p in preds[:2]:
        assert len(p.scores) == len(p.tokens)
        assert sum(p.scores) == pytest.approx(1.0, abs=1e-5)
    assert preds[0].tokens[max(range(len(preds[0].scores)), key=preds[0].scores.__getitem__)] \
        == "superb"
    assert preds[2].tokens == [] and preds[2].scores == []


def test_load_run_is_eval_mode(run):
    model, pipeline = load_run(run[1])
    assert not model.training and pipeline.maxlen == 24


def test_chinese_reviews_with_char_tokenizer(tmp_path):
    data = write_reviews(tmp_path / "zh", n_train=400, n_test=100, chinese=True)
    torch.manual_seed(0)
    train(data, tmp_path / "run", preset="keras2018", tokenizer="char", num_words=60,
          maxlen=32, epochs=5, lr=5e-3, progress=False, device="cpu")
    assert json.loads((tmp_path / "run" / "test_metrics.json").read_text())["accuracy"] > 0.85
    pred = predict(tmp_path / "run", ["这部电影很精彩"])[0]
    assert pred.tokens == list("这部电影很精彩") and pred.prob > 0.5
