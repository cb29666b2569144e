"""The translate app end to end on a tiny pairs file (seconds), plus its metric helpers."""

import json
import random

import pytest
import torch

from attnkit.apps import translate as app
from attnkit.errors import CheckpointError, DataError

TINY = {"model": {"hidden": 32, "emb_dim": 16}, "epochs": 4, "batch_size": 8, "lr": 1e-2,
        "max_minutes": None, "threads": 1, "progress": False, "examples": 2}


WORDS = {"one": "un", "two": "deux", "three": "trois", "four": "quatre", "five": "cinq",
         "six": "six", "seven": "sept", "eight": "huit", "nine": "neuf", "ten": "dix"}


def write_pairs(path, n=300, seed=1):
    """Word-for-word number sentences ("one two ." -> "un deux ."): learnt in seconds."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        en = rng.choices(list(WORDS), k=rng.randint(2, 5))
        lines.append(" ".join(en) + " .\t" + " ".join(WORDS[w] for w in en) + " .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path




@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    before = torch.get_num_threads()
    folder = tmp_path_factory.mktemp("translate")
    data = write_pairs(folder / "pairs.tsv")
    logs = []
    metrics = app.train(str(data), folder / "run", log=logs.append, **TINY)
    torch.set_num_threads(before)
    return folder / "run", metrics, logs, data


def test_run_folder_contents(tiny_run):
    run, metrics, logs, _ = tiny_run
    for name in ("config.json", "vocab_src.json", "vocab_tgt.json", "metrics.jsonl",
                 "best.safetensors", "last", "test_metrics.json", "heatmap.png", "report.html"):
        assert (run / name).exists(), name
    config = json.loads((run / "config.json").read_text())
    assert config["app"] == "translate" and config["train"]["select_metric"] == "bleu"
    assert config["data"]["kind"] == "file"
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
             if '"eval"' in line]
    assert evals and all("val_bleu" in e for e in evals)
    assert set(metrics) >= {"bleu", "chrf", "counts", "by_length", "sentences"}
    assert 30 < metrics["bleu"] <= 100     # it learnt something (number words, one by one)
    assert any(line.startswith("test: BLEU") for line in logs)
    assert "<img" in (run / "report.html").read_text()


def test_saved_run_gives_identical_results(tiny_run):
    run, metrics, _, _ = tiny_run
    again = app.evaluate(run)   # reloads config, vocabularies and best.safetensors from disk
    assert again["bleu"] == metrics["bleu"] and again["counts"] == metrics["counts"]
    a = app.translate(run, ["one two three .", "The cat does not see her."])
    b = app.Translator.load(run).translate(["one two three .", "The cat does not see her."])
    for x, y in zip(a, b, strict=True):
        assert x.tokens == y.tokens
        assert x.attention.shape == (len(x.tokens), len(x.source_tokens))
        assert (x.attention == y.attention).all()


def test_vocabulary_that_does_not_match_the_weights(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(tiny_run[0], run)
    vocab = json.loads((run / "vocab_src.json").read_text())
    key = "tokens"
    vocab[key][5], vocab[key][6] = vocab[key][6], vocab[key][5]   # same size, other ids
    (run / "vocab_src.json").write_text(json.dumps(vocab))
    with pytest.raises(CheckpointError, match="does not match"):
        app.Translator.load(run)
    vocab[key].append("zzz-new-word")                              # other size
    (run / "vocab_src.json").write_text(json.dumps(vocab))
    with pytest.raises(CheckpointError, match="does not match"):
        app.Translator.load(run)


def test_truncated_checkpoint_is_a_checkpoint_error(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(tiny_run[0], run)
    data = (run / "best.safetensors").read_bytes()
    (run / "best.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        app.Translator.load(run)
    with pytest.raises(CheckpointError, match="config.json"):
        app.Translator.load(tmp_path)


def test_resume_a_finished_run_and_refuse_to_overwrite(tiny_run):
    run, metrics, _, data = tiny_run
    again = app.train(resume=run, log=lambda _: None, threads=1, progress=False, examples=1)
    assert again["bleu"] == metrics["bleu"]
    with pytest.raises(CheckpointError, match="--resume"):
        app.train(str(data), run, log=lambda _: None, **TINY)


def test_empty_sentence_and_missing_data(tiny_run, tmp_path):
    with pytest.raises(DataError, match="empty sentence"):
        app.translate(tiny_run[0], ["Fine.", "   "])
    with pytest.raises(DataError, match="no such file"):
        app.data_spec(str(tmp_path / "absent.tsv"))


def test_multi_reference_bleu_and_length_table():
    hyps = ["le chat noir dort ici .", "un chien"]
    one = app.bleu_chrf(hyps, [["le chat noir dort là ."], ["un chien"]])
    two = app.bleu_chrf(hyps, [["le chat noir dort là .", "le chat noir dort ici ."],
                               ["un chien"]])
    assert two["bleu"] == pytest.approx(100.0) and one["bleu"] < 100.0
    assert two["counts"]["sys_len"] == 8
    rows = app.by_length_table([3, 12], hyps, [["le chat noir dort ici ."], ["un chat"]])
    assert [(r["lengths"], r["n"]) for r in rows] == [("1-5", 1), ("11-15", 1)]
    assert rows[0]["bleu"] == pytest.approx(100.0)


def test_file_split_keeps_alternatives_together():
    pairs = [(f"s{i}", f"t{i}") for i in range(200)] + [("s5", "alt")]
    splits = app._split_file(pairs, seed=0)
    where = {en: name for name, ps in splits.items() for en, _ in ps}
    assert sum(len(v) for v in splits.values()) == 201
    assert [name for name, ps in splits.items() for en, fr in ps if en == "s5"] == \
        [where["s5"]] * 2
