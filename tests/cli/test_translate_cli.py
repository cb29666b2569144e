"""``attnkit translate`` end to end on a tiny run: train, eval --json, predict, errors."""

import io
import json
import random

import pytest
import torch

from attnkit.cli.main import main

WORDS = {"one": "un", "two": "deux", "three": "trois", "four": "quatre", "five": "cinq"}




@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    rng = random.Random(0)
    lines = []
    for _ in range(200):
        en = rng.choices(list(WORDS), k=rng.randint(2, 4))
        lines.append(" ".join(en) + " .\t" + " ".join(WORDS[w] for w in en) + " .")
    (folder / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = torch.get_num_threads()
    rc = main(["translate", "train", "--data", str(folder / "pairs.tsv"), "--out",
               str(folder / "run"), "--hidden", "32", "--emb-dim", "16", "--epochs", "3",
               "--batch-size", "8", "--lr", "1e-2", "--max-minutes", "0", "--no-progress"])
    torch.set_num_threads(before)
    assert rc == 0
    return folder / "run"


def test_train_wrote_a_run(run_dir):
    assert (run_dir / "best.safetensors").exists()
    assert (run_dir / "heatmap.png").exists()


def test_eval_json_is_the_last_line(run_dir, capsys):
    assert main(["translate", "eval", "--run", str(run_dir), "--beam", "2", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    metrics = json.loads(out[-1])
    assert {"bleu", "chrf", "counts"} <= set(metrics)
    assert metrics["beam"] == 2
    assert any(line.startswith("BLEU") for line in out[:-1])   # the table comes first


def test_predict_argument_plot_and_stdin(run_dir, tmp_path, capsys, monkeypatch):
    plot = tmp_path / "one.png"
    assert main(["translate", "predict", "--run", str(run_dir), "one two .",
                 "--plot", str(plot)]) == 0
    assert capsys.readouterr().out.strip()
    assert plot.exists() and plot.stat().st_size > 1000
    monkeypatch.setattr("sys.stdin", io.StringIO("three four .\n\none .\n"))
    assert main(["translate", "predict", "--run", str(run_dir), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["source"] for r in rows] == ["three four .", "one ."]
    assert all(len(r["attention"]) == len(r["tokens"]) for r in rows)


def test_clear_errors_without_traceback(run_dir, tmp_path, capsys, monkeypatch):
    assert main(["translate", "predict", "--run", str(run_dir), " "]) == 2
    assert "empty sentence" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["translate", "predict", "--run", str(run_dir)]) == 2
    assert "no sentence" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "vocab_src.json", "vocab_tgt.json"):
        (broken / name).write_bytes((run_dir / name).read_bytes())
    data = (run_dir / "best.safetensors").read_bytes()
    (broken / "best.safetensors").write_bytes(data[:100])          # truncated
    assert main(["translate", "predict", "--run", str(broken), "one ."]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnkit: error:") and "Traceback" not in err


@pytest.mark.parametrize("action", [[], ["train"], ["eval"], ["predict"]])
def test_help_everywhere_has_examples(action, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", *action, "--help"])
    assert exit_info.value.code == 0
    assert "attnkit translate train --data synthetic" in capsys.readouterr().out
