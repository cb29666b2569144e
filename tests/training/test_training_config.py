"""TrainConfig JSON round trip and validation; learning-rate schedules."""

from __future__ import annotations

import math

import pytest

from attnkit.errors import CheckpointError
from attnkit.training import TrainConfig
from attnkit.training.config import (
    budgets_given,
    given_options,
    stored_train_config,
    trainer_options,
)
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


def test_trainer_options_names_patience_as_the_trainer_does():
    assert trainer_options({"patience": 3, "lr": 0.1}) == {"lr": 0.1, "early_stopping_patience": 3}
    assert trainer_options({"patience": 0}) == {"early_stopping_patience": None}   # never stop
    given = {"epochs": 2}
    assert trainer_options(given) == given and trainer_options(given) is not given


def test_none_is_not_given_except_for_the_budgets():
    options = {"lr": None, "epochs": 3, "max_minutes": None, "early_stopping_patience": None}
    assert given_options(options) == {"epochs": 3, "max_minutes": None,
                                      "early_stopping_patience": None}
    assert budgets_given(options) == {"max_minutes": None, "early_stopping_patience": None}
    assert budgets_given({"max_minutes": 2.0, "epochs": 3}) == {"max_minutes": 2.0}


def test_stored_train_config_reads_config_json_or_names_the_file():
    cfg = TrainConfig(epochs=3, max_minutes=None)
    assert stored_train_config({"train": cfg.to_dict()}, "x") == cfg
    for config, reason in (({}, "got NoneType"), ({"train": {"lerning_rate": 1}}, "unknown"),
                           ({"train": {"epochs": 0}}, "epochs")):
        with pytest.raises(CheckpointError, match=f"^RUN/config.json: bad train settings "
                                                  f"\\(.*{reason}"):
            stored_train_config(config, "RUN/config.json: bad train settings")
