"""The IMDB benchmark's inputs: lengths from real reviews, padding at the start."""

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "imdb_vs_keras.py"


def _bench():
    spec = importlib.util.spec_from_file_location("imdb_vs_keras", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_review_lengths_are_words_capped_at_maxlen(tmp_path):
    bench = _bench()
    path = tmp_path / "train.jsonl.gz"
    reviews = ["Great<br />film, isn't it?!", "word " * 150, "one"]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, text in enumerate(reviews):
            f.write(json.dumps({"text": text, "label": i % 2}) + "\n")
    assert bench.imdb_lengths(path).tolist() == [4, bench.MAXLEN, 1]


def test_inputs_follow_the_given_lengths_padded_at_the_start():
    bench = _bench()
    ids, lengths, labels = bench.make_inputs(500, np.array([3, bench.MAXLEN]))
    assert set(lengths.tolist()) == {3, bench.MAXLEN}
    assert ids.shape == (500, bench.MAXLEN) and labels.shape == (500,)
    real = ids != 0
    assert (real.sum(1) == lengths).all()
    assert real[lengths == 3][:, -3:].all()  # the real ids are the last ones
    uniform = bench.make_inputs(500)[1]
    assert uniform.min() >= 10 and uniform.max() <= bench.MAXLEN and len(set(uniform)) > 50


def test_thread_counts_of_one_run():
    bench = _bench()
    assert bench.parse_threads("1,2") == [1, 2]
    assert bench.parse_threads("2") == [2]
    for bad in ("", "0,2", "1,1", "two"):
        with pytest.raises(ValueError, match="--threads"):
            bench.parse_threads(bad)


def test_median_rate():
    bench = _bench()
    assert bench.median_rate(100, [2.0, 1.0, 4.0]) == 50.0


def _row(train, infer, rss=500.0, others=0.01):
    return {"samples_per_s": train, "infer_samples_per_s": infer, "peak_rss_mb": rss,
            "others_cpu": others}


def test_summary_takes_ratios_within_each_round_then_their_median_and_spread():
    bench = _bench()
    base, keras = bench.BASE, bench.KERAS_TF
    # Keras/TF's throughput moves from round to round; attnkit's ratio to it is what counts.
    rounds = [
        {base: _row(300.0, 900.0, 400.4), keras: _row(200.0, 300.0, 700.0)},  # 1.5x, 3.0x
        {base: _row(400.0, 800.0, 410.0), keras: _row(200.0, 400.0, 690.0)},  # 2.0x, 2.0x
        {base: _row(330.0, 1000.0, 405.0), keras: _row(300.0, 400.0, 710.0, 0.2)},  # 1.1x, 2.5x
    ]
    out = bench.summary({2: rounds})["2"]
    assert [r["train_vs_keras_tf"] for r in out["rounds"]] == [1.5, 2.0, 1.1]
    assert [r["infer_vs_keras_tf"] for r in out["rounds"]] == [3.0, 2.0, 2.5]
    # The median of the ratios (1.5, 2.5), not the ratio of the medians (330/200, 900/400).
    assert out["train_vs_keras_tf"] == 1.5 and out["infer_vs_keras_tf"] == 2.5
    assert out["train_spread"] == round(2.0 / 1.1, 3) and out["infer_spread"] == 1.5
    assert out["rounds_compared"] == 3
    assert out["train_samples_per_s"] == {base: 330.0, keras: 200.0}
    assert out["infer_x_keras_tf"] == {base: 2.5, keras: 1.0}
    assert out["peak_rss_mb"] == {base: 410, keras: 710}  # the largest of the rounds
    assert out["others_cpu_max"][keras] == 0.2
    assert out["rounds"][1]["infer_samples_per_s"] == {base: 800.0, keras: 400.0}
    assert out["errors"] == {}
    assert json.loads(json.dumps(out)) == out


def test_summary_with_even_rounds_failed_rows_and_amp_as_float32():
    bench = _bench()
    base, keras = bench.BASE, bench.KERAS_TF
    amp, torch_row = "attnkit --amp auto", "Keras 3 / torch"
    rounds = [
        {base: _row(300.0, 900.0), keras: _row(200.0, 300.0),
         amp: {"same_as_float32": True}, torch_row: {"error": "not installed"}},
        {base: _row(400.0, 800.0), keras: {"error": "failed: x"},
         amp: {"same_as_float32": True}, torch_row: {"error": "not installed"}},
        {base: _row(420.0, 840.0), keras: _row(200.0, 400.0),
         amp: {"same_as_float32": True}, torch_row: {"error": "not installed"}},
    ]
    out = bench.summary({1: rounds})["1"]
    # The round without Keras/TF compares nothing; the median of two ratios is their mean.
    assert [r["train_vs_keras_tf"] for r in out["rounds"]] == [1.5, None, 2.1]
    assert out["rounds_compared"] == 2
    assert out["train_vs_keras_tf"] == 1.8 and out["train_spread"] == 1.4
    assert out["infer_vs_keras_tf"] == 2.55 and out["infer_spread"] == round(3.0 / 2.1, 3)
    # --amp auto that resolved to float32 reports the same round's float32 numbers.
    assert out["train_samples_per_s"][amp] == out["train_samples_per_s"][base] == 400.0
    assert out["train_x_keras_tf"][amp] == out["train_x_keras_tf"][base] == 1.8
    assert out["errors"] == {keras: ["failed: x"], torch_row: ["not installed"] * 3}
    assert torch_row not in out["peak_rss_mb"] and out["train_samples_per_s"][torch_row] is None
    nothing = bench.summary({2: [{base: _row(1.0, 1.0)}]})["2"]
    assert nothing["train_vs_keras_tf"] is None and nothing["train_spread"] is None


def test_rows_to_run():
    bench = _bench()
    assert [r[0] for r in bench.parse_rows("keras-tf,float32")] == ["float32", "keras-tf"]
    assert len(bench.parse_rows("all")) == len(bench.ROWS)
    for bad in ("", "float32,float32", "keras"):
        with pytest.raises(ValueError, match="--rows"):
            bench.parse_rows(bad)


def test_busy_seconds_from_proc_stat():
    bench = _bench()
    # user nice system idle iowait irq softirq steal guest guest_nice
    line = "cpu  100 20 30 5000 40 5 6 7 0 0"
    assert bench.busy_seconds(line, ticks_per_s=100) == (100 + 20 + 30 + 5 + 6 + 7) / 100
    assert bench.OthersMeter().share() is None  # under a second: ticks say nothing
