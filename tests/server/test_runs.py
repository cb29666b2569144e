"""Which app a folder is a run of, and the options' rules (no web stack needed)."""

from __future__ import annotations

import json

import pytest

from attnkit.errors import CheckpointError, UsageError
from attnkit.server.options import ServeOptions, is_loopback, parse_run, read_api_keys
from attnkit.server.runs import app_of


def test_the_app_of_a_run_and_of_a_ctranslate2_export(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"app": "sentiment"}), encoding="utf-8")
    assert app_of(run) == ("sentiment", None)
    export = tmp_path / "export"
    export.mkdir()   # CTranslate2's own config.json names no app; attnkit.json does
    (export / "config.json").write_text(json.dumps({"add_source_bos": False}), encoding="utf-8")
    (export / "attnkit.json").write_text(json.dumps({"app": "translate"}), encoding="utf-8")
    assert app_of(export) == ("translate", "ctranslate2")
    with pytest.raises(CheckpointError, match="no such run folder"):
        app_of(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="not a run folder"):
        app_of(tmp_path)
    (run / "config.json").write_text("[]", encoding="utf-8")
    with pytest.raises(CheckpointError, match="JSON object"):
        app_of(run)


def test_run_names(tmp_path):
    assert parse_run("fr=runs/fr").name == "fr"
    assert parse_run(str(tmp_path / "imdb")).name == "imdb"
    for bad in ("a b=runs/x", "=runs/x", "fr="):
        with pytest.raises(UsageError):
            parse_run(bad)


def test_options_are_checked_in_one_place(tmp_path):
    run = parse_run("fr=runs/fr")
    assert ServeOptions(runs=[run]).check().port == 8000
    with pytest.raises(UsageError, match="at least one run"):
        ServeOptions().check()
    with pytest.raises(UsageError, match="--api-keys"):
        ServeOptions(runs=[run], host="0.0.0.0").check()
    ServeOptions(runs=[run], host="0.0.0.0", insecure=True).check()
    ServeOptions(runs=[run], host="0.0.0.0", api_keys=frozenset({"k" * 20})).check()
    for bad in ({"port": 70000}, {"workers": 0}, {"threads": 0}, {"max_wait_ms": -1},
                {"timeout_s": 0}, {"max_texts": True}, {"engine": "onnx"}):
        with pytest.raises(UsageError):
            ServeOptions(runs=[run], **bad).check()
    assert ServeOptions(runs=[run], threads=3).torch_threads() == 3
    assert ServeOptions(runs=[run], workers=64).torch_threads() == 1
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_api_key_files(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# ops team\n\n" + "a" * 20 + "\n  " + "b" * 32 + "  \n", encoding="utf-8")
    assert read_api_keys(keys) == {"a" * 20, "b" * 32}
    for text, match in (("# none\n", "no key"), ("short\n", "key 1"),
                        ("a" * 10 + " " + "b" * 10 + "\n", "key 1")):
        keys.write_text(text, encoding="utf-8")
        with pytest.raises(UsageError, match=match):
            read_api_keys(keys)
    with pytest.raises(UsageError, match="cannot read"):
        read_api_keys(tmp_path / "missing.txt")
