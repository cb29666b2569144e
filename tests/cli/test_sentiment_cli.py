"""``attnkit sentiment train|eval|predict`` end to end on a tiny synthetic run."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnkit.cli.main import main
from attnkit.training.run_folder import RunLock

TRAIN = ["--epochs", "6", "--lr", "0.01", "--num-words", "50", "--maxlen", "16",
         "--valid-fraction", "0.2", "--device", "cpu", "--no-progress"]


def _data(folder, n_train=600, n_test=100, name="{split}.jsonl.gz"):
    rng = random.Random(1)
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("test", n_test)):
        if not n:
            continue
        with gzip.open(folder / name.format(split=split), "wt") as f:
            for _ in range(n):
                y = rng.randint(0, 1)
                words = [rng.choice("the a film plot was it of".split()) for _ in range(8)]
                words.insert(rng.randrange(9), "superb" if y else "awful")
                f.write(json.dumps({"text": " ".join(words), "label": y}) + "\n")
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = _data(tmp_path_factory.mktemp("d") / "imdb")
    out = tmp_path_factory.mktemp("r") / "run"
    code = main(["sentiment", "train", "--preset", "keras2018", "--data", str(data), "--out",
                 str(out), "--seed", "3", *TRAIN])
    assert code == 0
    return data, out


def exit_status(argv: list[str]) -> int:
    """``attnkit ARGV``'s exit status (argparse's own errors exit through SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def one_error_line(capsys) -> str:
    """The single ``attnkit: error:`` line a user mistake prints (and nothing else on stderr)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnkit: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def test_train_prints_the_curve(run, capsys):
    data, out = run
    copy = out.parent / "curve"
    shutil.copytree(out, copy)
    capsys.readouterr()
    assert main(["sentiment", "train", "--resume", str(copy), "--epochs", "7"]) == 0
    text = capsys.readouterr().out
    assert "Keras 2018 test acc" in text and "  test (its weights): accuracy " in text
    # One test accuracy per weights: the row of the kept weights is marked, and it is the
    # figure the last line gives (the last epoch's may differ).
    kept = [line for line in text.splitlines() if line.endswith("<- kept (best validation)")]
    assert len(kept) == 1
    final = text.split("test (its weights): accuracy ")[1].split()[0]
    assert abs(float(kept[0].split()[2]) - float(final)) < 1e-3
    epochs = [json.loads(x).get("epoch") for x in (copy / "metrics.jsonl").read_text().split("\n")
              if x.strip()]
    assert max(e for e in epochs if e is not None) == 6


def test_eval_json_last_line(run, capsys):
    data, out = run
    capsys.readouterr()
    assert main(["sentiment", "eval", "--run", str(out), "--data", str(data), "--json"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    metrics = json.loads(last)
    assert metrics["accuracy"] > 0.9 and metrics["examples"] == 100
    assert main(["sentiment", "eval", "--run", str(out), "--json"]) == 0  # its own test split
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == metrics


def test_eval_report(run, capsys, tmp_path):
    report = tmp_path / "eval.html"
    assert main(["sentiment", "eval", "--run", str(run[1]), "--report", str(report)]) == 0
    page = report.read_text(encoding="utf-8")
    assert "accuracy" in page and "<span" in page


def test_predict_ansi_and_html(run, capsys, tmp_path):
    _, out = run
    html = tmp_path / "page.html"
    assert main(["sentiment", "predict", "--run", str(out), "--color", "always", "--html",
                 str(html), "the film was superb", "awful plot"]) == 0
    text = capsys.readouterr().out
    assert "P(positive)" in text and "\x1b[" in text
    page = html.read_text(encoding="utf-8")
    assert "superb" in page and "<span" in page
    assert main(["sentiment", "predict", "--run", str(out), "--json", "superb", "awful"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [r["label"] for r in rows] == ["positive", "negative"]
    assert rows[0]["prob"] > 0.5 and rows[0]["weights"] == [pytest.approx(1.0)]
    assert rows[0]["spans"] == [[0, 6]] and rows[0]["unknown"] == 0 and rows[0]["truncated"] == 0


def test_predict_reads_stdin_and_notes_what_it_could_not_read(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("superb film\n\n这部电影很精彩\n"))
    assert main(["sentiment", "predict", "--run", str(run[1]), "--json"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(x) for x in captured.out.strip().splitlines()]
    assert len(rows) == 2 and rows[1]["unknown"] == 1.0
    assert captured.err.strip() == ("attnkit: note: review 2: 100% of its 1 token(s) are "
                                    "unknown to the model's vocabulary")


def test_help_shows_examples(capsys):
    for action in ("train", "eval", "predict"):
        with pytest.raises(SystemExit) as exc:
            main(["sentiment", action, "--help"])
        assert exc.value.code == 0
        assert "examples:" in capsys.readouterr().out


def _broken(run, tmp_path, content: bytes) -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(run, copy)
    (copy / "config.json").write_bytes(content)
    return copy


def _other_app(run, tmp_path) -> Path:
    copy = tmp_path / "caption"
    shutil.copytree(run, copy)
    (copy / "config.json").write_text('{"app": "caption", "format": 2}')
    return copy


def _bad_labels(tmp_path) -> Path:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "label": 7}\n')
    return bad


# Each user mistake: (argv after "sentiment", with {run} {data} {tmp} {new} filled in; what the
# one error line says).
MISTAKES = [
    (["train", "--data", "{tmp}/nope", "--out", "{new}"], "no such file or folder"),
    (["train", "--data", "{bad}", "--out", "{new}"], "bad.jsonl:1:"),
    (["train", "--data", "{data}", "--out", "{new}", "--num-words", "1"], "--num-words"),
    (["train", "--data", "{data}", "--out", "{new}", "--maxlen", "0"], "--maxlen"),
    (["train", "--data", "{data}", "--out", "{new}", "--valid-fraction", "1.5"],
     "--valid-fraction"),
    (["train", "--data", "{data}", "--out", "{new}", "--epochs", "0"], "--epochs"),
    (["train", "--data", "{data}", "--out", "{new}", "--threads", "0"], "--threads"),
    (["train", "--data", "{data}", "--out", "{new}", "--preset", "bogus"], "invalid choice"),
    (["train", "--data", "{data}"], "--out"),
    (["train", "--data", "{data}", "--out", "{run}"], "already holds a run"),
    (["train", "--resume", "{tmp}/nothing"], "nothing to resume"),
    (["train", "--resume", "{run}", "--seed", "4"], "--seed 4 differs from the resumed run's 3"),
    (["train", "--resume", "{run}", "--num-words", "99"], "--num-words 99 differs"),
    (["train", "--resume", "{run}", "--overwrite"], "contradict"),
    (["predict", "--run", "{caption}", "superb"], "is a caption run, not a sentiment run"),
    (["eval", "--run", "{caption}"], "is a caption run, not a sentiment run"),
    (["predict", "--run", "{invalid}", "superb"], "not valid JSON"),
    (["eval", "--run", "{not_utf8}"], "not UTF-8"),
    (["predict", "--run", "{run}", ""], "review 1 is empty"),
    (["predict", "--run", "{tmp}/nope", "superb"], "no such run folder"),
    (["predict", "--run", "{run}", "--device", "cuda:7", "superb"], "--device"),
    (["eval", "--run", "{run}", "--data", "{tmp}/nope"], "no such file or folder"),
]


@pytest.mark.parametrize("argv, message", MISTAKES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _)
                                                         in enumerate(MISTAKES)])
def test_user_mistakes_are_one_line_and_exit_2(run, capsys, tmp_path, argv, message):
    data, out = run
    fill = {"run": out, "data": data, "tmp": tmp_path, "new": tmp_path / "new",
            "bad": _bad_labels(tmp_path), "caption": _other_app(out, tmp_path),
            "invalid": _broken(out, tmp_path, b'{"app": '),
            "not_utf8": _broken(out, tmp_path / "u", b'{"app": "sentiment\xff"}')}
    capsys.readouterr()
    args = [a.format(**fill) for a in argv]
    assert exit_status(["sentiment", *args]) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "new").exists()


def test_eval_without_test_data_says_to_pass_data(tmp_path, capsys):
    data = _data(tmp_path / "d", n_train=200, n_test=0, name="{split}.jsonl")
    out = tmp_path / "run"
    assert main(["sentiment", "train", "--data", str(data / "train.jsonl"), "--out", str(out),
                 *TRAIN[:2], "--epochs", "1", *TRAIN[4:]]) == 0
    capsys.readouterr()
    assert main(["sentiment", "eval", "--run", str(out)]) == 2
    assert "pass the data with --data" in one_error_line(capsys)


def test_overwrite_replaces_the_run(run, tmp_path, capsys):
    data, out = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    (copy / "stale.txt").write_text("from the old run")
    assert main(["sentiment", "train", "--data", str(data), "--out", str(copy), "--overwrite",
                 "--seed", "5", *TRAIN[:2], "--epochs", "1", *TRAIN[4:]]) == 0
    config = json.loads((copy / "config.json").read_text())
    assert config["train"]["seed"] == 5 and config["train"]["epochs"] == 1
    assert not (copy / "stale.txt").exists()


def test_a_second_training_into_one_folder_fails_naming_the_holder(run, tmp_path, capsys):
    data, _ = run
    out = tmp_path / "busy"
    with RunLock(out):
        assert main(["sentiment", "train", "--data", str(data), "--out", str(out), *TRAIN]) == 2
        assert f"PID {os.getpid()}" in one_error_line(capsys)
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnkit.cli.main", "sentiment", *args]


def test_sigterm_before_the_first_evaluation_exits_143_then_resumes(tmp_path):
    # One long epoch (about 900 steps): the signal lands long before its evaluation.
    data = _data(tmp_path / "d", n_train=3800, n_test=0)
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_cli("train", "--data", str(data), "--out", str(out), "--epochs",
                                 "3", "--batch-size", "4", "--num-words", "50", "--maxlen", "16",
                                 "--valid-fraction", "0.05", "--device", "cpu", "--threads",
                                 "1", "--no-progress"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics, deadline = out / "metrics.jsonl", time.monotonic() + 240
    # A train line (every 50 steps) means the trainer's signal handler is installed.
    while not (metrics.is_file() and '"train"' in metrics.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout + stderr
    assert "Traceback" not in stdout + stderr and "--resume" in stderr
    assert (out / "last").is_dir() and not (out / "best.safetensors").exists()
    resumed = subprocess.run(_cli("train", "--resume", str(out), "--epochs", "1"), env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (out / "best.safetensors").is_file() and "stop: completed" in resumed.stdout
