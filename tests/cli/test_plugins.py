"""Plugin apps (entry points of the group ``attnkit.apps``) that are broken, hang or clash:
``--help``, ``--version``, no arguments and a mistyped command never import one; a clashing
one is left out with one warning line naming its package; a broken one is one error line when
asked for; every built-in command keeps working."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from attnkit.apps import registry
from attnkit.cli.main import main

REVERSE = Path(__file__).resolve().parents[2] / "examples" / "reverse_app"

# package -> (module files, entry points)
PLUGINS = {
    "boom-runtime": ({"boom_runtime.py": "raise RuntimeError('no licence server')\n"},
                     "boom = boom_runtime:APP\n"),
    "boom-syntax": ({"boom_syntax.py": "def broken(:\n"}, "syntax = boom_syntax:APP\n"),
    "boom-exit": ({"boom_exit.py": "import sys\nsys.exit(3)\n"}, "quits = boom_exit:APP\n"),
    "boom-hang": ({"boom_hang.py": "import time\ntime.sleep(3600)\n"}, "hangs = boom_hang:APP\n"),
    "boom-oexit": ({"boom_oexit.py": "import os\nos._exit(7)\n"}, "oexit = boom_oexit:APP\n"),
    "boom-thread": ({"boom_thread.py": "import threading, time\nthreading.Thread("
                                       "target=time.sleep, args=(3600,)).start()\n"},
                    "lingers = boom_thread:APP\n"),
    "clash-serve": ({}, "serve = attnkit_reverse:APP\n"),
    "clash-translate": ({}, "translate = attnkit_reverse:APP\n"),
    "twin-one": ({}, "reverse = attnkit_reverse:APP\n"),
    "twin-two": ({}, "reverse = attnkit_reverse:ReverseApp\n"),   # a class is instantiated
    "odd-name": ({}, "--version = attnkit_reverse:APP\n"),
}


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The packages of `PLUGINS` installed as pip would (a ``.dist-info`` each), and a fresh
    registry that has warned about nothing yet."""
    for name, (modules, entry_points) in PLUGINS.items():
        info = tmp_path / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                       encoding="utf-8")
        (info / "entry_points.txt").write_text(f"[attnkit.apps]\n{entry_points}",
                                               encoding="utf-8")
        for file, code in modules.items():
            (tmp_path / file).write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(REVERSE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "APPS", registry.AppRegistry())
    yield
    for module in ("boom_runtime", "boom_syntax", "boom_exit", "boom_hang"):
        sys.modules.pop(module, None)


def run(capsys, argv: list[str]) -> tuple[int, str, list[str]]:
    """``attnkit ARGV``: its exit status, stdout and stderr lines (--help exits itself)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err.strip().splitlines()


def test_help_and_version_survive_broken_and_clashing_plugins(plugins, capsys):
    code, out, err = run(capsys, ["--help"])
    assert code == 0
    for command in ("translate", "sentiment", "caption", "serve", "reverse", "boom", "hangs",
                    "oexit"):
        assert command in out
    assert "(from the package 'boom-runtime 1.0')" in out
    assert all(line.startswith("attnkit: warning: ") for line in err), err
    for package in ("clash-serve", "clash-translate", "twin-one", "twin-two", "odd-name"):
        assert len([line for line in err if f"'{package} 1.0'" in line]) == 1, (package, err)
    assert any("two packages add an app named 'reverse'" in line for line in err)
    assert not any("boom" in line for line in err)          # never imported: nothing to say
    code, out, _ = run(capsys, ["--version"])
    assert code == 0 and out.startswith("attnkit ")


def test_no_plugin_is_imported_unless_asked_for(plugins, tmp_path):
    """#47: a plugin that hangs at import, exits (``os._exit(7)``) or leaves a thread running
    held ``--help``, ``--version``, no arguments and a mistyped command (rc 7, no output)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REVERSE),
                                                        *sys.path])}
    for argv, code, stream, words in ((["--help"], 0, "stdout", "hangs"),
                                      (["--version"], 0, "stdout", "attnkit"),
                                      ([], 0, "stdout", "usage: attnkit"),
                                      (["tranlsate"], 2, "stderr", "invalid choice")):
        done = subprocess.run([sys.executable, "-m", "attnkit.cli.main", *argv], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == code and words in getattr(done, stream), (argv, done)


def test_a_plugin_that_hangs_at_import_is_one_error_line(plugins, capsys, monkeypatch):
    monkeypatch.setattr(registry, "PLUGIN_IMPORT_SECONDS", 0.5)
    code, _, err = run(capsys, ["hangs", "train"])
    assert code == 2 and err[-1].startswith("attnkit: error: the app 'hangs'")
    assert "did not end within 0.5 s" in err[-1] and "boom-hang 1.0" in err[-1]


@pytest.mark.parametrize("argv", [["serve", "--help"], ["translate", "train", "--help"],
                                  ["reverse", "train", "--help"]])
def test_built_in_commands_keep_working(plugins, capsys, argv):
    code, out, err = run(capsys, argv)
    assert code == 0 and out.startswith(f"usage: attnkit {argv[0]}")
    assert all(line.startswith("attnkit: warning: ") for line in err), err


def test_a_broken_plugin_asked_for_is_one_error_line(plugins, capsys):
    code, _, err = run(capsys, ["boom", "train"])
    assert code == 2 and err[-1].startswith("attnkit: error: the app 'boom'")
    assert "boom-runtime 1.0" in err[-1] and "RuntimeError" in err[-1]
    assert all(line.startswith("attnkit: warning: ") for line in err[:-1])


def test_a_plugin_whose_options_clash_is_one_error_line(plugins, capsys, monkeypatch):
    """An app that declares an option every app already has (``--epochs``): one error line
    when asked for, not an argparse error that breaks every command."""
    import attnkit_reverse

    from attnkit.settings import Option

    monkeypatch.setattr(type(attnkit_reverse.APP), "options",
                        (Option("--epochs", int, "again"),))
    code, out, err = run(capsys, ["--help"])
    assert code == 0 and "translate" in out
    code, _, err = run(capsys, ["reverse", "train", "--help"])
    assert code == 2 and "'reverse'" in err[-1] and "twin-" in err[-1] and "--epochs" in err[-1]


def test_a_plugin_whose_declarations_raise_is_one_error_line(plugins, capsys, monkeypatch):
    """Any exception while its parser is built (here a KeyError from a property): one error
    line, every other command works."""
    import attnkit_reverse

    def broken(self):
        raise KeyError("preset")
    monkeypatch.setattr(type(attnkit_reverse.APP), "options", property(broken))
    code, out, err = run(capsys, ["translate", "--help"])
    assert code == 0 and "train" in out
    code, _, err = run(capsys, ["reverse", "train"])
    assert code == 2 and "'reverse'" in err[-1] and "KeyError" in err[-1]
