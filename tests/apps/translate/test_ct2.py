"""A tiny Transformer run with subwords: every layer's and head's attention on the explorer page,
the CTranslate2 export (a self-contained folder) and ``engine="ctranslate2"`` giving attnkit's
greedy outputs, and the export's refusals."""

import json
import shutil
import sys

import numpy as np
import pytest
import torch

from attnkit.apps import translate as app
from attnkit.apps.translate import export_run
from attnkit.apps.translate.ct2 import EXPORT_FILE
from attnkit.errors import CheckpointError, UsageError

TINY = {"arch": "transformer", "d_model": 32, "heads": 2, "layers": 2, "ff_dim": 64,
        "dropout": 0.0, "subword": 40, "epochs": 10, "batch_size": 16, "lr": 5e-3, "warmup": 10,
        "max_minutes": None, "progress": False, "examples": 3}
SENTENCES = ["one two three .", "four five six seven .", "ten nine .", "eight one two six ."]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread is the fastest (conftest's ``one_thread``)."""


@pytest.fixture(scope="module")
def tf_run(number_pairs, tmp_path_factory):
    pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("transformer")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    app.train(str(number_pairs(folder / "pairs.tsv", seed=5)), folder / "run", log=lambda _: None,
              **TINY)
    torch.set_num_threads(before)
    return folder / "run"


@pytest.fixture(scope="module")
def exported(tf_run, tmp_path_factory):
    pytest.importorskip("ctranslate2")
    return export_run(tf_run, tmp_path_factory.mktemp("ct2") / "model", quantization="float32")


def test_every_layer_and_head_on_the_page(tf_run, tmp_path):
    run = app.load_run(tf_run)
    last = app.predict(run, SENTENCES)
    full = app.predict(run, SENTENCES, attention="all")
    for a, b in zip(last, full, strict=True):
        assert a.tokens == b.tokens and a.layer_weights is None
        t, s = len(b.tokens), len(b.source_tokens)
        assert b.layer_weights.shape == (2, 2, t, s)              # [layers, heads, T, S]
        np.testing.assert_allclose(b.layer_weights[-1].mean(axis=0), b.weights, atol=1e-6)
        np.testing.assert_allclose(b.weights, a.weights, atol=1e-5)   # = the default path
        assert not np.allclose(b.layer_weights[0], b.layer_weights[1])
    words = full[0].words()
    assert np.array(full[0].to_dict()["layer_weights"]).shape == \
        (2, 2, len(words.target), len(words.source))
    page = full[0].render(tmp_path / "p.html").read_text()
    assert 'id="layer"' in page and 'id="head"' in page and '"L":2,"H":2' in page
    report = (tf_run / "report.html").read_text()              # written by train
    assert '"L":2,"H":2' in report and "whole test set" in report


def test_pieces_are_shown_as_whole_words_with_their_attention_gathered(tf_run, tmp_path):
    run = app.load_run(tf_run)
    p = app.predict(run, ["one two three ."], attention="all")[0]
    assert any(t.startswith("\u2581") for t in p.source_tokens)   # the model reads pieces
    row = p.to_dict()
    assert "\u2581" not in json.dumps(row, ensure_ascii=False)
    assert row["source_tokens"] == ["one", "two", "three", "."]
    assert row["tokens"] == p.text.split()
    w = np.array(row["weights"])
    assert w.shape == (len(row["tokens"]), 4)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-3)   # rows stay distributions
    # A source word sums its pieces' columns; an output word averages its pieces' rows.
    words = p.words()
    i, j = words.tgt_owner[-1][0], 0
    rows = [k for k, [o] in enumerate(words.tgt_owner) if o == i]
    cols = [k for k, [o] in enumerate(words.src_owner) if o == j]
    assert w[i, j] == pytest.approx(p.weights[rows][:, cols].sum(axis=1).mean(), abs=1e-4)
    page = p.render(tmp_path / "p.html").read_text()
    assert "\u2581" not in page and '"src":["one","two","three","."]' in page
    figure = p.figure()
    labels = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels()]
    assert labels == ["one", "two", "three", "."]
    # Streamed: each word once its last piece is chosen, with the same row.
    streamed = [t for step in app.APP.stream(run, ["one two three ."], attention=True)
                for t in step.tokens]
    assert [t.token for t in streamed] == row["tokens"]
    plain = app.predict(run, ["one two three ."])[0].words()
    np.testing.assert_allclose(np.stack([t.weights for t in streamed]),
                               plain.matrix(app.predict(run, ["one two three ."])[0].weights),
                               atol=1e-4)


def test_predict_warns_on_foreign_text_invented_names_and_gibberish(tf_run, tmp_path, capsys):
    """Whole words against the run's training words (a subword model reads every word, so its
    pieces hid them): one warning line for each input the run cannot read."""
    from attnkit.cli.main import main

    assert (tf_run / "words_src.json").is_file()
    inputs = ["Ich habe heute keine Zeit.", "Zorblat and Quenthiva met Vrunk.",
              "Xqzt plorvk wenthu gragg.", "one two three ."]
    assert main(["translate", "predict", "--run", str(tf_run), *inputs]) == 0
    err = capsys.readouterr().err.splitlines()
    warned = {line.split(":")[2].strip() for line in err if "attnkit: warning:" in line}
    assert warned == {"sentence 1", "sentence 2", "sentence 3"}, err
    names = next(line for line in err if "warning: sentence 2" in line)
    assert "unknown to the run (zorblat, and, quenthiva, met, vrunk)" in names   # numbers only
    # A run written before the list was kept: its pieces, as before (no error).
    old = tmp_path / "old"
    shutil.copytree(tf_run, old)
    (old / "words_src.json").unlink()
    p = app.predict(old, ["Xqzt plorvk ."])[0]
    assert p.word_count == len(p.source_tokens)


def test_decoding_paths_give_the_same_outputs(tf_run):
    """No attention (fused kernels), the last layer's, every layer's: the same translations;
    and evaluate with and without <unk> replacement scores the same (no <unk> here)."""
    run = app.load_run(tf_run)
    for beam in (1, 3):
        fast = app.predict(run, SENTENCES, beam=beam, unk_replace=False, attention=False)
        assert all(p.weights is None for p in fast)
        for need in (True, "all"):
            slow = app.predict(run, SENTENCES, beam=beam, attention=need)
            assert [p.tokens for p in slow] == [p.tokens for p in fast]
    plain, replaced = app.evaluate(run, unk_replace=False), app.evaluate(run)
    assert plain["bleu"] == replaced["bleu"] and plain["counts"] == replaced["counts"]
    assert plain["bleu"] > 10                                   # it learnt something


def test_export_is_a_self_contained_folder(exported, tf_run):
    names = {p.name for p in exported.iterdir()}
    assert {"model.bin", "config.json", app.SUBWORD_FILE, EXPORT_FILE,
            *app.VOCAB_FILES.values()} <= names
    assert (exported / app.SUBWORD_FILE).read_bytes() == (tf_run / app.SUBWORD_FILE).read_bytes()
    settings = json.loads((exported / EXPORT_FILE).read_text())
    assert settings["engine"] == "ctranslate2" and settings["quantization"] == "float32"
    assert settings["max_source"] == app.load_run(tf_run).pipeline.max_source
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no leftovers


def test_ctranslate2_engine_gives_attnkit_greedy_outputs(exported, tf_run, tmp_path):
    moved = tmp_path / "elsewhere"                       # usable on its own, anywhere
    shutil.copytree(exported, moved)
    want = app.predict(tf_run, SENTENCES, unk_replace=False)
    got = app.predict(moved, SENTENCES, engine="ctranslate2")
    assert [p.tokens for p in got] == [p.tokens for p in want]
    assert [p.text for p in got] == [p.text for p in want]
    assert all(p.weights is None for p in got)
    ours = app.evaluate(tf_run, unk_replace=False)
    theirs = app.evaluate(moved, engine="ctranslate2")   # the run's test split, from attnkit.json
    assert theirs["engine"] == "ctranslate2" and theirs["sentences_per_s"] > 0
    assert theirs["bleu"] == ours["bleu"] and theirs["sentences"] == ours["sentences"]
    assert theirs["quantization"] == "float32"
    beams = app.predict(moved, SENTENCES, engine="ctranslate2", beam=3)
    assert all(p.text for p in beams)


def test_engine_refusals(exported, tf_run, tmp_path):
    with pytest.raises(UsageError, match="computes no attention"):
        app.predict(exported, SENTENCES, engine="ctranslate2", attention=True)
    with pytest.raises(UsageError, match="computes no attention"):
        app.evaluate(exported, engine="ctranslate2", report=tmp_path / "r.html")
    with pytest.raises(CheckpointError, match="export it first"):
        app.load_run(tf_run, engine="ctranslate2")
    with pytest.raises(CheckpointError, match="--engine ctranslate2"):
        app.load_run(exported)
    with pytest.raises(UsageError, match="engine must be one of"):
        app.load_run(tf_run, engine="onnx")


def test_export_refusals(tf_run, tmp_path, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        export_run(tf_run, full)
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    with pytest.raises(UsageError, match="quantization must be one of"):
        export_run(tf_run, tmp_path / "q", quantization="int4")
    words = tmp_path / "words"
    shutil.copytree(tf_run, words)
    config = json.loads((words / "config.json").read_text())
    config["options"]["subword"] = None
    (words / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match="trained on words"):
        export_run(words, tmp_path / "w")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)    # not installed
    with pytest.raises(UsageError, match=r"pip install 'attnkit\[serve\]'"):
        export_run(tf_run, tmp_path / "n")
    assert not (tmp_path / "q").exists() and not (tmp_path / "w").exists()
    assert not (tmp_path / "n").exists()


@pytest.mark.parametrize("damage", ["flip model.bin", "edit config.json", "cut vocabulary",
                                    "truncate model.bin", "empty model.bin"])
def test_a_damaged_export_is_refused(exported, tmp_path, damage):
    """Any byte changed since the export (the manifest's sha256) is one CheckpointError."""
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    if damage == "flip model.bin":
        data = bytearray((copy / "model.bin").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (copy / "model.bin").write_bytes(bytes(data))
    elif damage == "edit config.json":
        config = json.loads((copy / "config.json").read_text())
        config["add_source_bos"] = not config.get("add_source_bos", False)
        (copy / "config.json").write_text(json.dumps(config))
    elif damage == "cut vocabulary":
        name = next(n for n in ("shared_vocabulary.json", "target_vocabulary.json")
                    if (copy / n).exists())
        tokens = json.loads((copy / name).read_text())
        (copy / name).write_text(json.dumps(tokens[: len(tokens) // 2]))
    elif damage == "truncate model.bin":
        (copy / "model.bin").write_bytes((copy / "model.bin").read_bytes()[:1000])
    else:
        (copy / "model.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match="changed since the export"):
        app.load_run(copy, engine="ctranslate2")


def test_an_export_without_a_manifest_or_that_ctranslate2_cannot_load_is_refused(exported,
                                                                                 tmp_path):
    from attnkit.ct2_export.ctranslate2 import write_manifest

    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    (copy / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="no manifest.json"):
        app.load_run(copy, engine="ctranslate2")
    (copy / "model.bin").write_bytes(b"\x00" * 64)
    write_manifest(copy)
    with pytest.raises(CheckpointError, match="CTranslate2 cannot load"):
        app.load_run(copy, engine="ctranslate2")


def test_the_two_engines_agree_on_an_untrained_model(number_pairs, tmp_path):
    """A model that has barely trained emits special tokens mid-sentence: both engines drop
    them the same way (attnkit "" and CTranslate2 "<bos><bos>..." differed)."""
    pytest.importorskip("ctranslate2")
    run = tmp_path / "run"
    app.train(str(number_pairs(tmp_path / "pairs.tsv", seed=2)), run, log=lambda _: None,
              **{**TINY, "epochs": 1, "lr": 1e-6, "warmup": 0})
    out = export_run(run, tmp_path / "ct2", quantization="float32")
    ours = app.predict(run, SENTENCES, attention=False, unk_replace=False)
    theirs = app.predict(out, SENTENCES, engine="ctranslate2", unk_replace=False)
    assert [p.tokens for p in ours] == [p.tokens for p in theirs]
    assert all("<bos>" not in p.text and "<eos>" not in p.text for p in theirs)
