"""attnkit.allocator: glibc's malloc thresholds, raised by the attnkit command at start."""

import ctypes
import platform

import pytest

from attnkit import allocator
from attnkit.cli import main as cli_main

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_settings_take_effect_on_glibc():
    assert allocator.reuse_freed_memory() is True


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    calls = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *a: calls.append(a))
    assert allocator.reuse_freed_memory() is False
    assert calls == []


def test_the_command_sets_them_first(monkeypatch):
    calls = []
    monkeypatch.setattr(cli_main, "reuse_freed_memory", lambda: calls.append(True))
    assert cli_main.main([]) == 0
    assert calls == [True]
