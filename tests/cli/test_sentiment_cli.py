"""``attnkit sentiment train|eval|predict`` end to end on a tiny synthetic run."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from attnkit.cli.main import main


def _data(folder):
    rng = random.Random(1)
    folder.mkdir()
    for split, n in (("train", 600), ("test", 100)):
        with gzip.open(folder / f"{split}.jsonl.gz", "wt") as f:
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
                 str(out), "--epochs", "6", "--lr", "0.01", "--num-words", "50", "--maxlen",
                 "16", "--valid-fraction", "0.2", "--seed", "3", "--device", "cpu",
                 "--no-progress"])
    assert code == 0
    return data, out


def test_eval_json_last_line(run, capsys):
    data, out = run
    capsys.readouterr()
    assert main(["sentiment", "eval", "--run", str(out), "--data", str(data), "--json"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    metrics = json.loads(last)
    assert metrics["accuracy"] > 0.9 and metrics["examples"] == 100


def test_predict_ansi_and_html(run, capsys, tmp_path):
    _, out = run
    html = tmp_path / "page.html"
    assert main(["sentiment", "predict", "--run", str(out), "--color", "always", "--html",
                 str(html), "the film was superb", "awful plot"]) == 0
    text = capsys.readouterr().out
    assert "P(positive)" in text and "\x1b[" in text
    page = html.read_text(encoding="utf-8")
    assert "superb" in page and "<span" in page
    assert main(["sentiment", "predict", "--run", str(out), "--json", "superb"]) == 0
    preds = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert preds[0]["prob"] > 0.5 and preds[0]["scores"] == [pytest.approx(1.0)]


def test_resume_continues_a_finished_run(run):
    data, out = run
    assert main(["sentiment", "train", "--data", str(data), "--resume", str(out), "--epochs", "7",
                 "--lr", "0.01", "--num-words", "50", "--maxlen", "16", "--valid-fraction",
                 "0.2", "--seed", "3", "--device", "cpu", "--no-progress"]) == 0
    epochs = [json.loads(x).get("epoch") for x in (out / "metrics.jsonl").read_text().split("\n")
              if x.strip()]
    assert max(e for e in epochs if e is not None) == 6


def test_help_and_errors(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["sentiment", "train", "--help"])
    assert exc.value.code == 0
    assert "examples:" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "label": 7}\n')
    assert main(["sentiment", "train", "--data", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert f"{bad}:1:" in capsys.readouterr().err
    assert main(["sentiment", "eval", "--run", str(tmp_path / "nope"), "--data", str(bad)]) == 2
