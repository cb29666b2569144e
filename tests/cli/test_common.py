"""The options and exits every app's command shares (attnkit.cli.apps, attnkit.cli.main)."""

import argparse
import io
import subprocess
import sys
from types import SimpleNamespace

import pytest

from attnkit.cli import apps as cli_apps
from attnkit.cli.main import main
from attnkit.errors import UsageError


def test_exit_code_is_128_plus_the_signal():
    assert cli_apps.exit_code(SimpleNamespace(stop_reason="signal", signal="SIGTERM")) == 143
    assert cli_apps.exit_code(SimpleNamespace(stop_reason="signal", signal="SIGINT")) == 130
    assert cli_apps.exit_code(SimpleNamespace(stop_reason="completed", signal=None)) == 0


def test_read_inputs_takes_arguments_or_stdin_and_refuses_empty(monkeypatch):
    assert cli_apps.read_inputs(["a", "b"], "sentence") == ["a", "b"]
    with pytest.raises(UsageError, match="sentence 2 is empty"):
        cli_apps.read_inputs(["a", "  "], "sentence")
    monkeypatch.setattr(sys, "stdin", io.StringIO("one\n\n two\r\n"))
    assert cli_apps.read_inputs([], "review") == ["one", " two"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n \n"))
    with pytest.raises(UsageError, match="no review given: stdin was empty"):
        cli_apps.read_inputs([], "review")


def _train_args(argv):
    parser = argparse.ArgumentParser()
    cli_apps.add_train_options(parser)
    return parser.parse_args(argv)


def test_train_target_and_overrides_keep_only_what_was_given():
    args = _train_args(["--out", "r", "--seed", "3", "--amp", "off", "--max-minutes", "0"])
    assert cli_apps.train_target(args) == (cli_apps.Path("r"), False)
    assert cli_apps.train_overrides(args) == {"seed": 3, "amp": False, "max_minutes": None}
    assert cli_apps.train_target(_train_args(["--resume", "r"])) == (cli_apps.Path("r"), True)
    assert cli_apps.train_target(_train_args(["--out", "r", "--resume"])) == (
        cli_apps.Path("r"), True)
    with pytest.raises(UsageError, match="name two folders"):
        cli_apps.train_target(_train_args(["--out", "a", "--resume", "b"]))
    with pytest.raises(UsageError, match="--out RUN"):
        cli_apps.train_target(_train_args([]))


def test_argparse_mistakes_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", "train", "--seed", "abc"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error: argument --seed")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("attnkit ")


def test_a_closed_pipe_is_no_traceback():
    # `attnkit --help | head -1`: the reader goes away while we write.
    proc = subprocess.run(
        f"{sys.executable} -c 'import sys; from attnkit.cli.main import main; "
        "sys.argv[0] = \"attnkit\"; "
        "sys.exit(main([\"translate\", \"train\", \"--help\"]))' | head -c 10",
        shell=True, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr


def test_no_arguments_prints_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: attnkit") and "translate" in out and "caption" in out


def test_invalid_utf8_inputs_are_replaced_and_counted(capsys, monkeypatch):
    bad = b"ok \xff there".decode("utf-8", "surrogateescape")
    assert cli_apps.read_inputs([bad], "sentence") == ["ok \ufffd there"]
    assert "sentence 1: 1 invalid UTF-8 sequence(s)" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\xfeb\r\n\nc\n")))
    assert cli_apps.read_inputs([], "review") == ["a\ufffdb", "c"]


def test_a_warning_is_one_line_only_while_the_command_runs(capsys, monkeypatch):
    """``main`` shows a warning as one ``attnkit: warning:`` line, and leaves the process's
    warning settings as it found them (a program that imports attnkit keeps its own)."""
    import warnings

    from attnkit.cli import main as cli_main

    def warn(_args) -> int:
        warnings.warn("bf16 is slow here", UserWarning, stacklevel=1)
        return 0

    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.set_defaults(func=warn)
    monkeypatch.setattr(cli_main, "build_parser", lambda argv: parser)
    before = (warnings.showwarning, warnings.formatwarning, list(warnings.filters))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["anything"]) == 0
        assert capsys.readouterr().err == "attnkit: warning: bf16 is slow here\n"
        assert (warnings.showwarning, warnings.formatwarning) == before[:2]
        with pytest.warns(UserWarning, match="outside"):   # the caller's handling, as before
            warnings.warn("outside", UserWarning, stacklevel=1)
    assert list(warnings.filters) == before[2]


class _Endless(io.RawIOBase):
    """A stream that never ends (stdin from ``/dev/zero``), counting what was read."""

    def __init__(self, fill: bytes = b"\0") -> None:
        self.fill, self.read_bytes = fill, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = len(buffer)
        buffer[:n] = (self.fill * (n // len(self.fill) + 1))[:n]
        self.read_bytes += n
        return n


@pytest.mark.parametrize("stream, needle", [
    (lambda: _Endless(), "more than 1,048,576 bytes in stdin"),           # < /dev/zero
    (lambda: _Endless(b"a\n"), "more than 1,048,576 bytes in stdin"),     # endless lines
    (lambda: io.BytesIO(b"a\n" * 1001), "more than 1,000 lines in stdin")])
def test_predict_reads_stdin_up_to_a_cap(capsys, monkeypatch, stream, needle):
    """``predict < /dev/zero``, endless lines, or more lines than the cap: one line once the
    cap is read, before any run is loaded; never an endless read."""
    from attnkit import fileio

    monkeypatch.setattr(fileio, "MAX_TEXT_BYTES", 1 << 20)    # the caps, smaller: fast
    monkeypatch.setattr(fileio, "MAX_TEXT_LINES", 1000)
    for name in ("translate", "sentiment", "caption"):
        raw = stream()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(raw)))
        capsys.readouterr()
        assert main([name, "predict", "--run", "no-such-run"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("attnkit: error:") and needle in err
        assert getattr(raw, "read_bytes", 0) < 4 * (1 << 20)


def test_ctrl_c_while_the_command_starts_is_one_line():
    """KeyboardInterrupt while torch and the apps are imported (the first seconds of every
    command): exit 130 and one line at most, never a traceback."""
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from attnkit.cli.main import main\n"
        "sys.exit(main(['translate', 'train', '--help']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 1
