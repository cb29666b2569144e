"""The evaluation line a person reads (stderr and RUN/train.log)."""

from __future__ import annotations

import math

from attnkit.training.progress import append_line, progress_line


def test_progress_line():
    line = progress_line(step=120, epoch=1, epochs=3, train_loss=0.41234, samples_per_s=851.2,
                         elapsed=3723.4, metrics={"loss": 0.35671, "bleu": 12.3})
    assert line == ("step 120  epoch 2/3  train loss 0.4123  val loss 0.3567  val bleu 12.3  "
                    "851 samples/s  1h02m03s")
    line = progress_line(step=1, epoch=0, epochs=1, train_loss=math.nan, samples_per_s=3.0,
                         elapsed=59.9, metrics={"tiny": 1.5e-5})
    assert line.endswith("train loss nan  val tiny 1.500e-05  3 samples/s  59s")
    assert "\n" not in line


def test_append_line(tmp_path):
    path = tmp_path / "train.log"
    append_line(path, "a")
    append_line(path, "b")
    assert path.read_text() == "a\nb\n"
