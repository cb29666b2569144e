"""Settings as dataclasses (`attnkit.settings`): fields that declare their default, bounds and
help; the options and help texts generated from them; the one check; what a resume applies."""

from dataclasses import dataclass

import pytest

from attnkit.errors import UsageError
from attnkit.settings import (
    Option,
    check_resume,
    check_settings,
    help_of,
    options_of,
    setting,
    split_options,
)


@dataclass
class Demo:
    length: int = setting(8, "the most digits per sequence", low=2)
    rate: float | None = setting(None, "a rate", defaults={"small": 0.1, "large": 0.2},
                                 valid=(lambda x: 0 <= x < 1, "a number in [0, 1)"))
    kind: str = setting("a", "what kind", choices=("a", "b"))
    quiet: bool = setting(False, "say less", commands=("train", "eval"))
    seed: int = setting(0, "common: not an app option", low=0)
    hidden: int = 3

    def __post_init__(self) -> None:
        check_settings(self)


def test_the_options_come_from_the_fields_with_their_defaults():
    options = {o.flag: o for o in options_of(Demo)}
    assert set(options) == {"--length", "--rate", "--kind", "--quiet"}   # seed: every app's
    assert options["--length"].help == "the most digits per sequence (default 8)"
    assert options["--length"].type is int and options["--rate"].type is float
    assert options["--rate"].help == "a rate (default 0.1 small, 0.2 large)"
    assert options["--kind"].choices == ("a", "b") and options["--quiet"].type is None
    assert options["--quiet"].commands == ("train", "eval")
    assert all(f"(default {getattr(Demo, name)})" in help_of(field) for name, field in
               Demo.__dataclass_fields__.items() if name in ("length", "kind"))


@pytest.mark.parametrize("given, message", [
    ({"length": 1}, "--length must be an integer >= 2, got 1"),
    ({"length": True}, "--length must be an integer >= 2"),
    ({"rate": 1.0}, r"--rate must be a number in \[0, 1\), got 1.0"),
    ({"kind": "c"}, "--kind must be one of a, b, got 'c'"),
])
def test_a_value_out_of_bounds_names_the_flag(given, message):
    with pytest.raises(UsageError, match=message):
        Demo(**given)
    assert Demo(rate=None).rate is None                    # None where the type allows it


def test_an_option_names_what_it_fills():
    assert Option("--emb-dim", int).name == "emb_dim"
    assert Option("--no-mask", dest="mask_padding", const=False).name == "mask_padding"


def test_split_options_by_owner_and_unknown_names():
    parts = split_options({"epochs": 3, "hidden": 8}, {"train": ("epochs",),
                                                       "model": ("hidden", "epochs")}, "demo")
    assert parts == {"train": {"epochs": 3}, "model": {"hidden": 8}}
    with pytest.raises(UsageError, match=r"unknown demo option\(s\): hiden \(known: epochs"):
        split_options({"hiden": 1}, {"train": ("epochs",)}, "demo option")


def test_check_resume_applies_budgets_and_refuses_changes():
    stored = {"seed": 0, "epochs": 8, "max_minutes": 2.0, "data": "synthetic"}
    assert check_resume(stored, {"seed": None, "epochs": 12, "max_minutes": 0.4}) == {
        "epochs": 12, "max_minutes": 0.4}
    assert check_resume(stored, {"seed": 0, "data": "synthetic"}) == {}
    with pytest.raises(UsageError, match="--seed 1 differs from the resumed run's 0"):
        check_resume(stored, {"seed": 1})
