"""TrainPosition: JSON round trip, unknown keys."""

from __future__ import annotations

import json

import pytest

from attnkit.errors import CheckpointError
from attnkit.training.trainer import LossWindow, TrainPosition


def test_round_trip_through_json():
    pos = TrainPosition(epoch=2, batch=1, global_step=13, best=0.25, best_tiebreak=0.1,
                        best_step=10, bad_evals=1, last_metrics={"loss": 0.3},
                        elapsed=4.5,
                        window=LossWindow(1.5, 32.0, 32, 4.0),
                        eval_window=LossWindow(2.5, 48.0, 48, 3.0))
    assert TrainPosition.from_dict(json.loads(json.dumps(pos.to_dict()))) == pos


def test_unknown_fields_are_refused():
    with pytest.raises(CheckpointError, match=r"unknown fields \['future'\]"):
        TrainPosition.from_dict({"epoch": 1, "future": 1})
    with pytest.raises(CheckpointError, match="JSON object"):
        TrainPosition.from_dict([1, 2])


def test_loss_window():
    w = LossWindow(start=10.0)
    w.add(4.0, 8.0, 8)
    w.add(2.0, 8.0, 8)
    assert w.mean_loss() == pytest.approx(6.0 / 16.0)
    assert w.samples_per_s(now=12.0) == pytest.approx(8.0)
