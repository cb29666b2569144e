"""Every application trains under ``torchrun --nproc_per_node=2`` through the real command line,
with the same test for each: the run completes, exactly one run folder appears with a valid
``config.json`` / ``metrics.jsonl`` / ``best.safetensors``, and the run then evaluates and
predicts in a plain process. Apps differ only in the rows of ``APPS`` (data + arguments)."""

from __future__ import annotations

import gzip
import json
import os
import random
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from PIL import Image
from safetensors import safe_open

from attnkit.cli.main import main


def _pairs(folder: Path) -> str:
    words = {"one": "un", "two": "deux", "three": "trois", "four": "quatre"}
    rng = random.Random(0)
    lines = []
    for _ in range(120):
        en = rng.choices(list(words), k=rng.randint(2, 3))
        lines.append(" ".join(en) + " .\t" + " ".join(words[w] for w in en) + " .")
    path = folder / "pairs.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _reviews(folder: Path) -> str:
    rng = random.Random(1)
    root = folder / "imdb"
    root.mkdir()
    for split, n in (("train", 120), ("test", 40)):
        with gzip.open(root / f"{split}.jsonl.gz", "wt", encoding="utf-8") as f:
            for _ in range(n):
                y = rng.randint(0, 1)
                words = [rng.choice("the a film plot was".split()) for _ in range(6)]
                words.insert(rng.randrange(7), "superb" if y else "awful")
                f.write(json.dumps({"text": " ".join(words), "label": y}) + "\n")
    return str(root)


def _image(folder: Path) -> str:
    path = folder / "scene.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(path)
    return str(path)


@dataclass
class App:
    """One application: ``make_data(folder) -> str`` fills ``{data}`` in the argument lists."""

    name: str
    make_data: object
    train: list[str]
    eval: list[str]
    predict: list[str]


APPS = [
    App("translate", _pairs,
        ["--data", "{data}", "--hidden", "16", "--emb-dim", "8", "--epochs", "2",
         "--batch-size", "16", "--max-minutes", "0"],
        ["--json"], ["one two ."]),
    App("sentiment", _reviews,
        ["--data", "{data}", "--epochs", "2", "--num-words", "30", "--maxlen", "10",
         "--valid-fraction", "0.2", "--batch-size", "16"],
        ["--data", "{data}", "--json"], ["superb film"]),
    App("caption", _image,
        ["--num-train", "16", "--num-valid", "4", "--num-test", "4", "--epochs", "1",
         "--batch-size", "8"],
        ["--json"], ["{data}"]),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fill(args: list[str], data: str) -> list[str]:
    return [a.replace("{data}", data) for a in args]




@pytest.mark.slow
@pytest.mark.parametrize("app", APPS, ids=[a.name for a in APPS])
def test_app_trains_under_torchrun_then_evaluates_and_predicts(app, tmp_path, capsys):
    data_dir, work = tmp_path / "data", tmp_path / "work"
    data_dir.mkdir()
    work.mkdir()
    data = app.make_data(data_dir)
    run = work / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           f"--master_port={_free_port()}", "-m", "attnkit.cli.main", app.name, "train",
           "--out", str(run), "--device", "cpu", "--seed", "0", "--no-progress",
           *_fill(app.train, data)]
    # One thread per rank: two ranks share the test machine's few cores.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # Exactly one run folder, nothing else (no per-rank copy, no default "runs/" folder).
    assert sorted(p.name for p in work.iterdir()) == ["run"]
    leftovers = [p.name for p in run.rglob("*") if p.name.endswith((".tmp", ".part"))]
    assert not leftovers, leftovers

    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert isinstance(config, dict) and config["train"]["seed"] == 0
    records = [json.loads(line) for line in
               (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    # Train lines come every log_every_steps (50), more than these tiny runs take.
    assert {r["kind"] for r in records} <= {"train", "eval"}
    assert any(r["kind"] == "eval" and r["step"] > 0 for r in records)
    # Rank 1 logs nothing: the steps of each kind strictly increase.
    for kind in ("train", "eval"):
        steps = [r["step"] for r in records if r["kind"] == kind]
        assert steps == sorted(set(steps)), (kind, steps)
    with safe_open(str(run / "best.safetensors"), framework="pt") as weights:
        names = list(weights.keys())
        assert names and all(torch.isfinite(weights.get_tensor(n)).all() for n in names)

    capsys.readouterr()
    assert main([app.name, "eval", "--run", str(run), *_fill(app.eval, data)]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(metrics, dict) and metrics
    assert main([app.name, "predict", "--run", str(run), *_fill(app.predict, data)]) == 0
    assert capsys.readouterr().out.strip()
