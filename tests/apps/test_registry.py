"""The registry of apps (`attnkit.apps.registry`)."""

import sys

import pytest

from attnkit.apps.registry import AppRegistry
from attnkit.errors import UsageError


def test_a_broken_plugin_fails_only_when_asked_for(tmp_path, monkeypatch):
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[attnkit.apps]\nbroken = no_such_module:APP\n"
                                           "fake = json:loads\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = AppRegistry()
    assert {"translate", "sentiment", "caption", "broken", "fake"} <= set(registry.names())
    with pytest.raises(UsageError, match="cannot be loaded"):
        registry["broken"]
    with pytest.raises(UsageError, match="not an attnkit App"):
        registry["fake"]
    with pytest.raises(KeyError):
        registry["nothing"]
    assert registry["translate"].name == "translate"
    assert "no_such_module" not in sys.modules
