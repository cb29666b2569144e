"""The translate app's settings: validation (one UsageError naming the flag), the model config
they build, and reading them back from a run's config.json for a resume."""

import dataclasses
from pathlib import Path

import pytest

from attnkit.apps import translate as app
from attnkit.apps.translate.settings import TranslateSettings, build_model_config, stored_settings
from attnkit.data.translation_splits import data_spec
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, UsageError

VOCAB = Vocab.build([["a", "b", "c"]])


def settings_from(overrides):
    """The settings of a new run given ``overrides`` (the shared configure path)."""
    return TranslateSettings.configure(overrides, Path("run"), None).settings


def resume_settings(config, data, overrides):
    """The settings a resume of the run stored as ``config`` trains with."""
    return TranslateSettings.configure({"data": data, **overrides}, Path("run"), config).settings


def config_of(settings, data="synthetic"):
    """The config.json a run trained with ``settings`` stores (what train writes)."""
    model = build_model_config(settings, VOCAB, VOCAB)
    return {"app": "translate", "data": data_spec(data, settings.seed, settings.train_size),
            "model": model.to_dict(), "train": settings.train_config().to_dict(),
            "options": {name: getattr(settings, name) for name in
                        ("label_smoothing", "max_len", "valid_sample", "min_freq", "max_vocab",
                         "subword", "batch_tokens", "examples", "align_loss", "align_layer")}}


@pytest.mark.parametrize("overrides, message", [
    ({"hiden": 3}, "unknown translate option.*hiden"),
    ({"hidden": -3}, "--hidden must be an integer >= 1"),
    ({"hidden": 2.5}, "--hidden must be an integer"),
    ({"epochs": True}, "--epochs must be an integer"),
    ({"dropout": 1.5}, r"--dropout must be a number in \[0, 1\)"),
    ({"teacher_forcing": -0.1}, r"--teacher-forcing must be a number in \[0, 1\]"),
    ({"lr": 0}, "--lr must be a positive number"),
    ({"max_minutes": float("inf")}, "--max-minutes must be a positive number"),
    ({"arch": "lstm"}, "--arch must be one of rnn, transformer"),
    ({"schedule": "steps"}, "--schedule must be one of"),
    ({"amp": "yes"}, "--amp must be one of"),
    ({"d_model": 64}, "--d-model is a setting of the other architecture"),
    ({"arch": "transformer", "hidden": 64}, "--hidden is a setting of the other"),
    ({"align_loss": 0.1}, "use it with --arch transformer"),
    ({"arch": "transformer", "align_loss": -1.0}, "--align-loss must be a positive number"),
])
def test_bad_settings_are_usage_errors_naming_the_flag(overrides, message):
    with pytest.raises(UsageError, match=message):
        settings_from(overrides)


def test_train_refuses_bad_settings_before_writing(tmp_path):
    for overrides in ({"hiden": 3}, {"hidden": -1}, {"device": "tpu"},
                      {"arch": "transformer", "d_model": 30, "heads": 4}):
        with pytest.raises(UsageError):
            app.train("synthetic", tmp_path / "run", train_size=20, **overrides)
    assert not (tmp_path / "run").exists()


def test_defaults_per_architecture():
    rnn, tr = TranslateSettings(), settings_from({"arch": "transformer", "subword": 100})
    assert (rnn.train_config().lr, rnn.train_config().schedule) == (3e-3, "constant")
    assert (tr.train_config().lr, tr.train_config().warmup_steps) == (1e-3, 300)
    assert build_model_config(rnn, VOCAB, VOCAB).hidden == 128
    assert build_model_config(tr, VOCAB, VOCAB).share_embeddings
    assert TranslateSettings().train_config().amp == TranslateSettings(amp=None).train_config().amp
    assert TranslateSettings(amp=True).train_config().amp is True
    with pytest.raises(UsageError, match="heads"):
        build_model_config(settings_from({"arch": "transformer", "d_model": 30}), VOCAB, VOCAB)


def test_stored_settings_round_trip():
    given = settings_from({"arch": "transformer", "d_model": 64, "heads": 2, "seed": 4,
                           "epochs": 3, "train_size": 50, "max_minutes": None,
                           "align_loss": 0.05, "align_layer": 1})
    stored = stored_settings(config_of(given))
    for field in ("arch", "d_model", "heads", "seed", "epochs", "train_size", "max_minutes",
                  "max_len", "valid_sample", "align_loss", "align_layer"):
        assert getattr(stored, field) == getattr(given, field), field
    assert stored.layers == 2 and stored.lr == 1e-3           # the defaults, made explicit
    with pytest.raises(CheckpointError, match="does not describe"):
        stored_settings({"model": {}, "data": {}})


def test_resume_applies_budgets_and_refuses_changes():
    config = config_of(settings_from({"seed": 2, "hidden": 48}))
    kept = resume_settings(config, None, {"epochs": 12, "max_minutes": None, "seed": 2,
                                          "hidden": 48, "device": "cpu"})
    assert (kept.epochs, kept.max_minutes, kept.seed, kept.device) == (12, None, 2, "cpu")
    assert resume_settings(config, "synthetic", {}) == dataclasses.replace(
        stored_settings(config))
    for overrides, message in (({"seed": 3}, "--seed 3 differs from the resumed run's 2"),
                               ({"hidden": 64}, "--hidden 64 differs"),
                               ({"subword": 800}, "--subword 800 differs"),
                               ({"arch": "transformer"}, "--arch transformer differs"),
                               ({"hiden": 1}, "unknown translate option")):
        with pytest.raises(UsageError, match=message):
            resume_settings(config, None, overrides)
    with pytest.raises(UsageError, match="--data .* differs"):
        resume_settings(config, "tatoeba", {})
