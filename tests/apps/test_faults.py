"""Faults that used to get through (an adversarial pass over every app), each replayed on the
command line: output flags naming a run's own files, links out of a run, signals at the last
step, invalid UTF-8, damaged or oversized run files, huge images, one bad review in a batch.
Every user mistake is one line ``attnkit: error: ...`` and exit 2, never a traceback, and the
run folder is left as it was."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from attnkit.apps import APPS
from attnkit.cli.main import main

# A caption run of seconds: 16 training scenes of 32 pixels, one batch an epoch.
TINY_CAPTION = ["--num-train", "16", "--num-valid", "4", "--num-test", "4", "--image-size", "32",
                "--batch-size", "16", "--no-progress", "--max-minutes", "0"]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def one_error(capsys, argv: list[str], *needles: str) -> str:
    """Run the CLI expecting a user error: exit 2, one line on stderr, no traceback."""
    capsys.readouterr()
    start = time.monotonic()
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("attnkit: error:"), (out, err)
    assert "Traceback" not in out + err and time.monotonic() - start < 20
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny trained run of each built-in app (``App.tiny``), and its inputs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out = {}
    try:
        for name in ("translate", "sentiment", "caption"):
            app, folder = APPS[name], tmp_path_factory.mktemp(name)
            tiny = app.tiny(folder)
            app.train(tiny.settings, folder / "run", log=lambda _: None)
            out[name] = (folder / "run", tiny)
    finally:
        torch.set_num_threads(before)
    return out


@pytest.mark.parametrize("name", ["translate", "sentiment", "caption"])
def test_output_flags_never_replace_a_run_file(runs, name, capsys, tmp_path):
    run, tiny = runs[name]
    inputs = [str(x) for x in tiny.inputs]
    before = snapshot(run)
    for target in ("config.json", "best.safetensors", "metrics.jsonl"):
        one_error(capsys, [name, "predict", "--run", str(run), *inputs, "--html",
                           str(run / target)], "is written to a .html")
        one_error(capsys, [name, "eval", "--run", str(run), "--report", str(run / target)])
        one_error(capsys, [name, "predict", "--run", str(run), *inputs, "--plot",
                           str(run / target)])
    # A page that merely has the name of a page: refused unless it is one.
    (tmp_path / "notes.html").write_text("my notes", encoding="utf-8")
    one_error(capsys, [name, "predict", "--run", str(run), *inputs, "--html",
                       str(tmp_path / "notes.html")], "not a page")
    assert snapshot(run) == before
    assert APPS[name].load(run).model is not None     # the run still loads


def test_resume_never_writes_through_a_link_out_of_the_run(runs, tmp_path, capsys):
    run, _ = runs["caption"]
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(run, copy)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n", encoding="utf-8")
    for name in ("train.log", "metrics.jsonl"):
        (copy / name).unlink()
        (copy / name).symlink_to(outside)
        one_error(capsys, ["caption", "train", "--resume", str(copy), "--epochs", "2"], "link")
        assert outside.read_text(encoding="utf-8") == "keep me\n"
        (copy / name).unlink()
        shutil.copyfile(run / name, copy / name)


def lsnapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` without following links: kind, size, mtime, target."""
    out = {}
    for p in sorted(folder.rglob("*")):
        info = p.lstat()
        out[str(p.relative_to(folder))] = (info.st_mode, info.st_size, info.st_mtime_ns,
                                           os.readlink(p) if p.is_symlink() else None)
    return out


@pytest.mark.parametrize("linked", ["last", "last/model.safetensors", "best.safetensors"])
def test_a_checkpoint_linked_out_of_the_run_is_one_line_then_resumes(runs, tmp_path, capsys,
                                                                     linked):
    """``last/`` or the weights a link out of the run: one line, nothing moved (no
    ``last.prev`` left pointing outside), and the run resumes once the real one is back."""
    import shutil

    run, _ = runs["caption"]
    copy, outside = tmp_path / "copy", tmp_path / "elsewhere"
    shutil.copytree(run, copy)
    (copy / ".lock").unlink(missing_ok=True)
    outside.mkdir()
    moved = outside / Path(linked).name
    shutil.move(copy / linked, moved)
    (copy / linked).symlink_to(moved)
    before, before_outside = lsnapshot(copy), lsnapshot(outside)
    for _ in range(2):    # and again: a refused resume leaves nothing that fails differently
        one_error(capsys, ["caption", "train", "--resume", str(copy), "--epochs", "2"],
                  str(copy / linked), "link")
        assert lsnapshot(copy) == before and lsnapshot(outside) == before_outside
    assert not os.path.lexists(copy / "last.prev")
    (copy / linked).unlink()
    shutil.move(moved, copy / linked)
    assert main(["caption", "train", "--resume", str(copy), "--epochs", "2"]) == 0
    assert (copy / "last" / "state.json").is_file() and not (copy / "last").is_symlink()


def test_a_run_file_that_is_a_device_or_huge_is_refused(runs, tmp_path, capsys):
    run, tiny = runs["translate"]
    for device in ("/dev/zero", "/dev/urandom"):
        copy = tmp_path / Path(device).name
        import shutil

        shutil.copytree(run, copy)
        (copy / "config.json").unlink()
        (copy / "config.json").symlink_to(device)
        one_error(capsys, ["translate", "predict", "--run", str(copy), "one ."], "config")


@pytest.mark.parametrize("name, file, key, value", [
    ("translate", "config.json", ("model", "hidden"), 10 ** 12),
    ("translate", "config.json", ("model", "layers"), 1.5),
    ("sentiment", "model.json", ("embed_dim",), 10 ** 12),
    ("caption", "model.json", ("hidden",), 10 ** 12),
])
def test_model_sizes_are_checked_before_allocation(runs, name, file, key, value, tmp_path,
                                                   capsys):
    import shutil

    run, tiny = runs[name]
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    data = json.loads((copy / file).read_text(encoding="utf-8"))
    target = data
    for k in key[:-1]:
        target = target[k]
    target[key[-1]] = value
    (copy / file).write_text(json.dumps(data), encoding="utf-8")
    one_error(capsys, [name, "predict", "--run", str(copy), *map(str, tiny.inputs)],
              key[-1])


def test_a_read_only_run_folder_is_one_line(runs, tmp_path, capsys, monkeypatch):
    """EROFS (what a read-only mount gives even to root) on a new run and on a resume."""
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).endswith(".lock") and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    one_error(capsys, ["caption", "train", "--out", str(tmp_path / "new"), "--num-train", "8",
                       "--image-size", "32", "--epochs", "1"], "read-only")
    run, _ = runs["caption"]
    import shutil

    shutil.copytree(run, tmp_path / "copy")
    (tmp_path / "copy" / ".lock").unlink(missing_ok=True)
    one_error(capsys, ["caption", "train", "--resume", str(tmp_path / "copy"), "--epochs",
                       "3"], "read-only")


def test_invalid_utf8_gives_valid_json_and_a_page(runs, tmp_path, capsys, monkeypatch):
    run, _ = runs["translate"]
    bad = b"one two \xff three .".decode("utf-8", "surrogateescape")   # as argv holds it
    page = tmp_path / "p.html"
    assert main(["translate", "predict", "--run", str(run), bad, "--json", "--html",
                 str(page)]) == 0
    out, err = capsys.readouterr()
    row = json.loads(out.strip())
    out.encode("utf-8")                       # no lone surrogate left in what was printed
    assert "\ufffd" in row["source"] and "replaced by U+FFFD" in err
    assert page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    sentiment_run, _ = runs["sentiment"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a superb \xfe film\n")))
    assert main(["sentiment", "predict", "--run", str(sentiment_run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "a superb \ufffd film"


def test_one_review_without_words_does_not_stop_the_batch(runs, capsys, monkeypatch):
    run, _ = runs["sentiment"]
    reviews = ["a superb film"] * 299 + ["!!! ..."]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(reviews) + "\n"))
    assert main(["sentiment", "predict", "--run", str(run), "--json"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 300 and rows[-1]["label"] == "empty" and rows[0]["prob"] is not None
    assert "review 300: no word the model reads" in err


def test_a_huge_image_is_refused_before_decoding(runs, tmp_path, capsys):
    run, _ = runs["caption"]
    bomb = tmp_path / "bomb.png"
    Image.new("1", (13000, 13000)).save(bomb)      # a few hundred KB, 169 megapixels
    assert bomb.stat().st_size < 1_000_000
    one_error(capsys, ["caption", "predict", "--run", str(run), str(bomb)], "13000 x 13000",
              "--max-pixels")


def test_a_signal_at_the_last_step_is_not_lost(tmp_path, capsys, monkeypatch):
    """SIGTERM while the last step's evaluation runs: exit 143 and a resumable run, then the
    resume finishes what is missing (the test metrics) and says the run is complete."""
    import attnkit.apps.caption.training as caption_training

    real = caption_training.caption_metrics
    calls = {"n": 0}

    def metrics_then_signal(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:          # the evaluation of the last (second) epoch
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(caption_training, "caption_metrics", metrics_then_signal)
    out = tmp_path / "run"
    args = [*TINY_CAPTION, "--epochs", "2"]
    assert main(["caption", "train", "--out", str(out), *args]) == 143
    assert (out / "last").is_dir() and not (out / "test_metrics.json").exists()
    monkeypatch.setattr(caption_training, "caption_metrics", real)
    capsys.readouterr()
    assert main(["caption", "train", "--resume", str(out)]) == 0
    assert (out / "test_metrics.json").is_file()
    assert "stop: completed" in capsys.readouterr().out


def test_a_signal_before_the_first_checkpoint_says_what_the_next_command_will(
        tmp_path, capsys, monkeypatch):
    """SIGTERM after config.json is written but before the first checkpoint: the line must not
    promise a resume that the resume then refuses; both say to start again with
    --overwrite, which works."""
    import attnkit.training.trainer as trainer

    real = trainer.Heartbeat

    def signal_then_heartbeat(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "Heartbeat", signal_then_heartbeat)
    out = tmp_path / "run"
    args = [*TINY_CAPTION, "--epochs", "1"]
    capsys.readouterr()
    assert main(["caption", "train", "--out", str(out), *args]) == 143
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("attnkit: interrupted by SIGTERM") and "--resume" not in line
    assert "cannot be resumed" in line and "--overwrite" in line
    assert (out / "config.json").is_file() and not (out / "last").exists()
    refusal = one_error(capsys, ["caption", "train", "--resume", str(out)], "--overwrite")
    assert "stopped before its first checkpoint" in refusal
    monkeypatch.setattr(trainer, "Heartbeat", real)
    assert main(["caption", "train", "--out", str(out), "--overwrite", *args]) == 0


def test_a_resume_keeps_the_runs_threads_unless_given(runs, tmp_path, capsys):
    """A run trained on 1 thread, resumed with no --threads in a process on 2, trains on 1
    again (the count is part of what a run computes); --threads given wins."""
    import shutil

    run, _ = runs["translate"]           # trained on 1 thread (the fixture)
    assert json.loads((run / "config.json").read_text())["runtime"]["machine"]["threads"] == 1
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for given, want in (([], 1), (["--threads", "2"], 2)):
            copy = tmp_path / f"copy{want}"
            shutil.copytree(run, copy)
            (copy / ".lock").unlink(missing_ok=True)
            assert main(["translate", "train", "--resume", str(copy), "--epochs", "3",
                         *given]) == 0
            config = json.loads((copy / "config.json").read_text())
            assert config["runtime"]["machine"]["threads"] == want, given
            assert torch.get_num_threads() == 2      # the process's count comes back
    finally:
        torch.set_num_threads(before)


def test_a_run_that_changes_app_before_the_lock_is_refused(runs, tmp_path, capsys,
                                                            monkeypatch):
    """The app is checked again once the run is locked: a folder replaced between the first
    check and the lock (here, its config.json now names another app) is one line."""
    import contextlib
    import shutil

    from attnkit.training import run_folder

    run, _ = runs["translate"]
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / ".lock").unlink(missing_ok=True)
    claim = run_folder.claim_run

    @contextlib.contextmanager
    def swapped(out, **kw):
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps({**config, "app": "sentiment"}))
        with claim(out, **kw) as path:
            yield path
    monkeypatch.setattr(run_folder, "claim_run", swapped)
    capsys.readouterr()
    assert main(["translate", "train", "--resume", str(copy), "--epochs", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("attnkit: error:") and "sentiment" in err[-1], err
