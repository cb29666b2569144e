"""Which app a folder is a run of, and the engine it needs."""

from __future__ import annotations

import json

import pytest

from attnkit.errors import CheckpointError

pytest.importorskip("fastapi", reason="the serve extra is missing")
from attnkit.apps import APPS  # noqa: E402
from attnkit.server.options import RunSpec, ServeOptions  # noqa: E402
from attnkit.server.state import check_run  # noqa: E402


def app_of(folder):
    return check_run(RunSpec("run", folder), ServeOptions())


def test_the_app_of_a_run_and_of_a_ctranslate2_export(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"app": "sentiment"}), encoding="utf-8")
    assert app_of(run) == (APPS["sentiment"], None)
    export = tmp_path / "export"
    export.mkdir()   # CTranslate2's own config.json names no app; attnkit.json does
    (export / "config.json").write_text(json.dumps({"add_source_bos": False}), encoding="utf-8")
    (export / "attnkit.json").write_text(json.dumps({"app": "translate"}), encoding="utf-8")
    assert app_of(export) == (APPS["translate"], "ctranslate2")
    with pytest.raises(CheckpointError, match="no such run folder"):
        app_of(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="not a run folder"):
        app_of(tmp_path)
    (run / "config.json").write_text("[]", encoding="utf-8")
    with pytest.raises(CheckpointError, match="JSON object"):
        app_of(run)
