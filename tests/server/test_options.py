"""The options' rules and the key file (no web stack needed)."""

from __future__ import annotations

import pytest

from attnkit.errors import UsageError
from attnkit.server.options import ServeOptions, is_loopback, parse_run, read_api_keys


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
    for bad, flag in (({"port": 70000}, "--port"), ({"workers": 0}, "--workers"),
                      ({"threads": 0}, "--threads"), ({"max_wait_ms": -1}, "--max-wait-ms"),
                      ({"timeout_s": 0}, "--timeout"), ({"max_texts": True}, "--max-texts"),
                      ({"engine": "onnx"}, "--engine"), ({"header_timeout_s": 0},
                                                         "--header-timeout"),
                      ({"max_connections": 0}, "--max-connections"),
                      ({"body_timeout_s": 0}, "--body-timeout"),
                      ({"max_batch_chars": 0}, "--max-batch-chars"),
                      ({"allowed_hosts": ("evil.example/x",)}, "--allowed-host"),
                      ({"allowed_hosts": ("",)}, "--allowed-host")):
        with pytest.raises(UsageError, match=flag):
            ServeOptions(runs=[run], **bad).check()
    assert ServeOptions(runs=[run], threads=3).torch_threads() == 3
    assert ServeOptions(runs=[run], workers=64).torch_threads() == 1
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_api_key_files(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# ops team\n\n" + "a" * 20 + "\n  " + "b" * 32 + "  \n", encoding="utf-8")
    assert read_api_keys(keys) == {"a" * 20, "b" * 32}
    for text, match in (("# none\n", "0 keys"), ("short\n", "key 1"),
                        ("a" * 10 + " " + "b" * 10 + "\n", "key 1")):
        keys.write_text(text, encoding="utf-8")
        with pytest.raises(UsageError, match=match):
            read_api_keys(keys)
    with pytest.raises(UsageError, match="missing"):
        read_api_keys(tmp_path / "missing.txt")


def test_a_key_file_is_read_with_a_cap(tmp_path):
    """/dev/zero, a huge file or a list of a million keys: one error, not gigabytes read."""
    with pytest.raises(UsageError, match="not a regular file"):
        read_api_keys("/dev/zero")
    big = tmp_path / "big.txt"
    big.write_bytes(b"k" * (1 << 20))
    with pytest.raises(UsageError, match="larger than 65,536 bytes"):
        read_api_keys(big)
    many = tmp_path / "many.txt"
    many.write_text("".join(f"{i:020d}\n" for i in range(1001)), encoding="utf-8")
    with pytest.raises(UsageError, match="1,001 keys"):
        read_api_keys(many)
    many.write_bytes(b"\xff" * 20 + b"\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_api_keys(many)


def test_the_access_log_is_on_unless_turned_off():
    import argparse

    from attnkit.cli.serve import add_serve_parser, serve_options

    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    assert serve_options(parser.parse_args(["serve", "--run", "r"])).access_log is True
    assert serve_options(parser.parse_args(["serve", "--run", "r", "--no-access-log"])
                      ).access_log is False


def test_the_new_limits_come_from_the_command_line():
    import argparse

    from attnkit.cli.serve import add_serve_parser, serve_options

    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    given = serve_options(parser.parse_args([
        "serve", "--run", "r", "--body-timeout", "5", "--max-batch-chars", "4096",
        "--allowed-host", "box.example", "--allowed-host", "10.0.0.7"]))
    assert (given.body_timeout_s, given.max_batch_chars, given.allowed_hosts) == (
        5.0, 4096, ("box.example", "10.0.0.7"))
    default = serve_options(parser.parse_args(["serve", "--run", "r"]))
    assert (default.body_timeout_s, default.max_batch_chars, default.allowed_hosts) == (
        20.0, 16384, ())
