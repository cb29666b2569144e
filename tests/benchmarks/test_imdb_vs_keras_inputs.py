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


def test_summary_ratios_against_keras_tf_and_peak_memory_per_row():
    bench = _bench()

    def row(train, infer, rss):
        return {"samples_per_s": train, "infer_samples_per_s": infer, "peak_rss_mb": rss}

    results = {
        1: {"attnkit float32": row(300.0, 900.0, 400.4), "attnkit --amp auto":
            {"same_as_float32": True}, "Keras 3 / tensorflow": row(200.0, 300.0, 700.0),
            "Keras 3 / torch": {"error": "not installed"}},
        2: {"attnkit float32": row(450.0, 1000.0, 410.0),
            "Keras 3 / tensorflow": {"error": "failed: x"}},
    }
    out = bench.summary(results)
    assert out["1"]["train_vs_keras_tf"] == 1.5 and out["1"]["infer_vs_keras_tf"] == 3.0
    # the --amp auto row that resolved to float32 reports the float32 numbers
    assert out["1"]["peak_rss_mb"] == {"attnkit float32": 400, "attnkit --amp auto": 400,
                                       "Keras 3 / tensorflow": 700}
    assert out["1"]["train_samples_per_s"]["attnkit --amp auto"] == 300.0
    assert out["2"]["train_vs_keras_tf"] is None and out["2"]["infer_vs_keras_tf"] is None
    assert json.loads(json.dumps(out)) == out


def test_busy_seconds_from_proc_stat():
    bench = _bench()
    # user nice system idle iowait irq softirq steal guest guest_nice
    line = "cpu  100 20 30 5000 40 5 6 7 0 0"
    assert bench.busy_seconds(line, ticks_per_s=100) == (100 + 20 + 30 + 5 + 6 + 7) / 100
    assert bench.OthersMeter().share() is None  # under a second: ticks say nothing
