"""One home for every default: each app's training options are generated from its settings
dataclass, and the default every help states is the one a run actually gets."""

from __future__ import annotations

import dataclasses
import re

import pytest

from attnkit.apps import caption, sentiment, translate
from attnkit.apps.caption.settings import CaptionSettings, model_config, train_config
from attnkit.apps.sentiment.settings import PRESETS, SentimentSettings
from attnkit.apps.translate.settings import (
    TranslateSettings,
    build_model_config,
)
from attnkit.data.translation_splits import SYNTHETIC_SIZES
from attnkit.data.vocab import Vocab
from attnkit.settings import default_text, help_of

APPS = ((translate.APP, TranslateSettings), (sentiment.APP, SentimentSettings),
        (caption.APP, CaptionSettings))


def stated(help_text: str, cases: tuple[str, ...] = ()) -> dict[str, str] | str:
    """The default a help states: ``"128"``, or by case (``cases``) ``{"rnn": "1", ...}``."""
    text = re.search(r"\(default ([^)]*)\)", help_text).group(1)
    if not cases:
        return text
    parts = [part.rsplit(" ", 1) for part in text.split(", ")]
    return {p[1]: p[0] for p in parts if len(p) == 2 and p[1] in cases}


def same(value, text: str) -> bool:
    return text == (f"{value:g}" if isinstance(value, float) else str(value))


@pytest.mark.parametrize("app, settings", APPS, ids=lambda x: getattr(x, "name", ""))
def test_every_option_of_a_setting_is_generated_from_its_field(app, settings):
    fields = {f.name: f for f in dataclasses.fields(settings) if f.metadata.get("help")}
    options = {o.name: o for o in app.options if "train" in o.commands}
    generated = [name for name in options if name in fields]
    assert generated, "no option comes from the settings"
    for name in generated:
        assert options[name].help == help_of(fields[name]), name
        if options[name].type is not None:
            assert f"default {default_text(fields[name])}" in options[name].help


def test_translate_helps_state_what_a_run_gets():
    helps = {o.name: o.help for o in translate.APP.options} | translate.APP.train_help
    vocab = Vocab.build([["a", "b"]])
    for arch in ("rnn", "transformer"):
        s = TranslateSettings(arch=arch)
        model, train = build_model_config(s, vocab, vocab), s.train_config()
        got = {"layers": model.layers, "dropout": model.dropout, "lr": train.lr,
               "schedule": train.schedule, "warmup": train.warmup_steps,
               "epochs": train.epochs, "batch_size": train.batch_size,
               "patience": train.early_stopping_patience, "max_minutes": train.max_minutes,
               "max_len": s.max_len, "valid_sample": s.valid_sample, "examples": s.examples}
        got |= ({"emb_dim": model.emb_dim, "hidden": model.hidden, "window": model.window,
                 "teacher_forcing": model.teacher_forcing_ratio} if arch == "rnn" else
                {"d_model": model.d_model, "heads": model.heads, "ff_dim": model.ff_dim})
        for name, value in got.items():
            by_arch = stated(helps[name], ("rnn", "transformer"))
            assert same(value, by_arch.get(arch) or stated(helps[name])), (arch, name)
    assert stated(helps["train_size"]) == str(SYNTHETIC_SIZES["train"])


def test_sentiment_helps_state_each_presets_values():
    helps = {o.name: o.help for o in sentiment.APP.options} | sentiment.APP.train_help
    for preset, spec in PRESETS.items():
        resolved = SentimentSettings(preset=preset, data="x").resolved()
        for name in ("num_words", "maxlen", "valid_fraction", "tokenizer"):
            assert same(getattr(resolved, name), stated(helps[name], tuple(PRESETS))[preset])
        for name in ("epochs", "batch_size", "lr"):
            assert same(spec["train"][name], stated(helps[name], tuple(PRESETS))[preset])


def test_caption_helps_state_what_a_run_gets():
    helps = {o.name: o.help for o in caption.APP.options} | caption.APP.train_help
    s, vocab = CaptionSettings(), Vocab.build([["a", "duck", "swims"]])
    train, model = train_config(s, {}), model_config({}, s.image_size, vocab, 5)
    for name, value in (("num_train", s.num_train), ("image_size", s.image_size),
                        ("valid_fraction", s.valid_fraction), ("epochs", train.epochs),
                        ("attention", model.attention), ("max_minutes", train.max_minutes),
                        ("lr", train.lr), ("batch_size", train.batch_size)):
        assert same(value, stated(helps[name])), name


def _options(parser, path=()):
    """Every (command path, option) of ``parser`` and its subcommands."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif action.option_strings and action.nargs != 0:
            yield path, action


# An option that limits time or work: its help must say what it is when not given.
BUDGET = re.compile(r"minutes|seconds|timeout|budget|patience")


def test_every_budget_and_every_preset_value_states_its_default():
    """``--help`` shows the default of every budget (a run stopped on a 2-minute budget its
    help did not state), and of every option that has a default value."""
    from attnkit.cli.main import build_parser

    checked = 0
    for path, action in _options(build_parser([])):
        budget = BUDGET.search(action.dest) or BUDGET.search(action.help or "")
        if budget or action.default is not None:
            checked += 1
            assert "default" in (action.help or ""), (path, action.option_strings, action.help)
    assert checked > 30
