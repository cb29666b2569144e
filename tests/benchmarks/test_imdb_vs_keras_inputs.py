"""The IMDB benchmark's inputs: lengths from real reviews, padding at the start."""

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np

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
