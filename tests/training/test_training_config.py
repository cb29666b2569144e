"""TrainConfig JSON round trip and validation; learning-rate schedules."""

from __future__ import annotations

import math

import pytest

from attnkit.training import TrainConfig
from attnkit.training.trainer import lr_factor


def test_config_json_round_trip():
    cfg = TrainConfig(epochs=3, batch_size=8, lr=3e-4, max_minutes=1.5, grad_clip=None,
                      schedule="inverse_sqrt", warmup_steps=10, early_stopping_patience=2,
                      select_metric="bleu", select_mode="max", amp=True)
    back = TrainConfig.from_json(cfg.to_json())
    assert back == cfg
    assert back.max_minutes == 1.5 and back.grad_clip is None


@pytest.mark.parametrize("bad", [{"epochs": 0}, {"lr": -1.0}, {"schedule": "step"},
                                 {"select_mode": "best"}, {"warmup_steps": -1},
                                 {"max_minutes": 0}])
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="TrainConfig"):
        TrainConfig(**bad)


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown TrainConfig fields"):
        TrainConfig.from_dict({"epochs": 1, "lerning_rate": 1.0})


def test_schedules_by_hand():
    # Warm-up is linear to 1 whatever the schedule.
    assert [lr_factor("cosine", s, 4, 14) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_factor("constant", 100, 0, 10) == 1.0
    assert lr_factor("linear", 4, 4, 14) == 1.0
    assert lr_factor("linear", 9, 4, 14) == pytest.approx(0.5)
    assert lr_factor("linear", 14, 4, 14) == 0.0
    assert lr_factor("cosine", 9, 4, 14) == pytest.approx(0.5)
    assert lr_factor("cosine", 14, 4, 14) == pytest.approx(0.0)
    assert lr_factor("inverse_sqrt", 3, 4, 100) == 1.0
    assert lr_factor("inverse_sqrt", 15, 4, 100) == pytest.approx(math.sqrt(4 / 16))
