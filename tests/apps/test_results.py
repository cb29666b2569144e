"""`attnkit.apps.results.AppSettings.configure`, the one path from the options given to a run's
settings: patience as the trainer's, None not given except for a budget, a bad stored config."""

from pathlib import Path

import pytest

from attnkit.apps.caption.settings import CaptionSettings
from attnkit.apps.sentiment.settings import SentimentSettings
from attnkit.errors import CheckpointError


def test_patience_is_the_trainers_and_none_is_not_given_except_for_a_budget():
    def train(**given):
        return CaptionSettings.configure(given, Path("run"), None).train

    assert train(patience=3).early_stopping_patience == 3
    assert train(patience=0).early_stopping_patience is None   # never stop early
    assert train(lr=None).lr == train().lr                       # None: not given
    assert train(max_minutes=None).max_minutes is None           # None: no budget


def test_a_bad_stored_train_config_names_the_file():
    stored = {"data": "/data", "num_words": 30, "maxlen": 10}
    for train, reason in ((None, "NoneType"), ({"lerning_rate": 1}, "unknown"),
                          ({"epochs": 0}, "epochs")):
        with pytest.raises(CheckpointError, match=f'^RUN/config.json: bad "train" settings '
                                                  f"\\(.*{reason}"):
            SentimentSettings.configure({}, Path("RUN"), {**stored, "train": train})
