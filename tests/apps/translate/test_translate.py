"""The translate app end to end on a tiny pairs file (seconds): train, load_run, evaluate,
predict, resume and overwrite rules, seeds, the source length cap, and the metric helpers."""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from attnkit.apps import Loaded
from attnkit.apps import translate as app
from attnkit.apps.run_files import FORMAT
from attnkit.apps.translate.evaluation import format_table
from attnkit.apps.translate.settings import stored_settings
from attnkit.bleu import bleu_chrf, by_length_table
from attnkit.errors import CheckpointError, DataError, UsageError

TINY = {"hidden": 32, "emb_dim": 16, "epochs": 4, "batch_size": 8, "lr": 1e-2,
        "max_minutes": None, "progress": False, "examples": 2}



def snapshot(folder):
    """Every file under ``folder`` with its size and mtime: 'nothing was written' checks."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread is the fastest (conftest's ``one_thread``)."""


@pytest.fixture(scope="module")
def tiny_run(number_pairs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("translate")
    data = number_pairs(folder / "pairs.tsv")
    with open(data, "a", encoding="utf-8") as f:   # two lines the run must report, not train on
        f.write("a line without a tab\none two .\t\n")
    logs = []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    result = app.train(str(data), folder / "run", log=logs.append, **TINY)
    torch.set_num_threads(before)
    return folder / "run", result, logs, data


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    shutil.copytree(tiny_run[0], tmp_path / "copy")
    return tmp_path / "copy"


def test_run_folder_contents(tiny_run):
    run, result, logs, _ = tiny_run
    assert result.stop_reason == "completed"
    for name in ("config.json", "vocab_src.json", "vocab_tgt.json", "metrics.jsonl",
                 "best.safetensors", "last", "test_metrics.json", "heatmap.png", "report.html"):
        assert (run / name).exists(), name
    config = json.loads((run / "config.json").read_text())
    assert config["app"] == "translate" and config["format"] == FORMAT
    assert config["train"]["select_metric"] == "bleu" and config["data"]["kind"] == "file"
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
             if '"eval"' in line]
    assert evals and all("val_bleu" in e for e in evals)
    metrics = json.loads((run / "test_metrics.json").read_text())
    assert set(metrics) >= {"bleu", "chrf", "counts", "by_length", "sentences", "stop_reason"}
    assert 30 < metrics["bleu"] <= 100     # it learnt something (number words, one by one)
    assert any(line.startswith("test: BLEU") for line in logs)
    dropped = next(line for line in logs if line.startswith("dropped 2 lines of"))
    assert "1 without a tab (" in dropped and "pairs.tsv:301)" in dropped
    assert "1 with an empty French side (" in dropped and "pairs.tsv:302)" in dropped
    page = (run / "report.html").read_text()
    assert 'id="attnkit-data"' in page and "whole test set" in page   # the explorer page
    assert "Reference" in page and "BLEU, sources of" in page


def test_saved_run_gives_identical_results(tiny_run):
    run, _, _, _ = tiny_run
    metrics = json.loads((run / "test_metrics.json").read_text())
    again = app.evaluate(run)   # reloads config, vocabularies and best.safetensors from disk
    assert again["bleu"] == metrics["bleu"] and again["counts"] == metrics["counts"]
    assert again["engine"] == "attnkit" and again["sentences_per_s"] > 0
    assert again["truncated"] == 0 and again["unknown"] == 0
    loaded = app.load_run(run)
    assert isinstance(loaded, Loaded) and not loaded.model.training and loaded.app == "translate"
    sentences = ["one two three .", "The cat does not see her."]
    a, b = app.predict(run, sentences), app.predict(loaded, sentences)
    for x, y in zip(a, b, strict=True):
        assert x.tokens == y.tokens
        assert x.weights.shape == (len(x.tokens), len(x.source_tokens))
        assert (x.weights == y.weights).all()
    assert a[0].unknown == 0 and a[1].unknown > 0.5       # the cat sentence: unknown words


def test_prediction_renders_itself(tiny_run, tmp_path):
    p = app.predict(tiny_run[0], ["one two ."])[0]
    row = p.to_dict()
    assert row["text"] == p.text and len(row["weights"]) == len(p.tokens)
    assert row["unknown"] == 0 and row["truncated"] == 0
    assert p.render(tmp_path / "a.png").stat().st_size > 1000
    page = p.render(tmp_path / "a.html").read_text()
    assert 'id="attnkit-data"' in page and '"src":["one","two","."]' in page
    with pytest.raises(UsageError, match="written to a .png"):
        p.render(tmp_path / "a.txt")


def test_long_sources_are_capped(tiny_run, tmp_path):
    run = app.load_run(tiny_run[0])
    huge = " ".join(["one"] * 100_000) + " ."
    p = app.predict(run, [huge, "two ."])[0]
    limit = run.pipeline.max_source
    assert limit == app.RNN_MAX_SOURCE
    assert len(p.source_tokens) == limit and p.truncated == 100_001 - limit
    assert p.weights.shape[1] == limit and "cut off" in p.note()
    data = tmp_path / "long.tsv"
    data.write_text(f"{huge}\tun .\none .\tun .\n", encoding="utf-8")
    metrics = app.evaluate(run, str(data))
    assert metrics["truncated"] == 1 and metrics["sentences"] == 2
    other = app.evaluate(run, "synthetic")      # the synthetic corpus: words it never saw
    assert 0.5 < other["unknown"] <= 1 and "unknown to the run" in format_table(other)
    assert "were cut" in format_table(metrics)


def test_vocabulary_that_does_not_match_the_weights(run_copy):
    vocab = json.loads((run_copy / "vocab_src.json").read_text())
    key = "tokens"
    vocab[key][5], vocab[key][6] = vocab[key][6], vocab[key][5]   # same size, other ids
    (run_copy / "vocab_src.json").write_text(json.dumps(vocab))
    with pytest.raises(CheckpointError, match="does not match"):
        app.load_run(run_copy)
    vocab[key].append("zzz-new-word")                              # other size
    (run_copy / "vocab_src.json").write_text(json.dumps(vocab))
    with pytest.raises(CheckpointError, match="does not match"):
        app.load_run(run_copy)


def test_truncated_checkpoint_and_broken_configs(run_copy, tmp_path):
    data = (run_copy / "best.safetensors").read_bytes()
    (run_copy / "best.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        app.load_run(run_copy)
    with pytest.raises(CheckpointError, match="config.json"):
        app.load_run(tmp_path)
    config = run_copy / "config.json"
    for broken, message in ((b"{not json", "not valid JSON"), (b"\xff\xfe{}", "not UTF-8"),
                            (b'{"app": "sentiment"}', "is a sentiment run"),
                            (b'{"app": "translate", "format": 2}', "no model or data settings")):
        config.write_bytes(broken)
        with pytest.raises(CheckpointError, match=message):
            app.load_run(run_copy)


def test_a_run_of_another_format_is_refused(run_copy):
    config = json.loads((run_copy / "config.json").read_text())
    del config["format"]                   # as runs of an unreleased 0.1.0 were written
    (run_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="format None is not the one this attnkit reads"):
        app.load_run(run_copy)


def test_settings_read_back_from_the_run(tiny_run):
    config = json.loads((tiny_run[0] / "config.json").read_text())
    stored = stored_settings(config)
    for name, value in TINY.items():
        assert getattr(stored, name) == value, name
    assert (stored.seed, stored.arch, stored.layers, stored.schedule) == (0, "rnn", 1, "constant")


def test_resume_and_overwrite_rules(tiny_run, run_copy):
    _, _, _, data = tiny_run
    before = snapshot(run_copy)
    with pytest.raises(CheckpointError, match="--resume"):
        app.train(str(data), run_copy, log=lambda _: None, **TINY)
    for overrides, message in (({"seed": 5}, "--seed 5 differs"),
                               ({"hidden": 64}, "--hidden 64 differs"),
                               ({"arch": "transformer", "d_model": 32}, "differs")):
        with pytest.raises(UsageError, match=message):
            app.train(None, run_copy, resume=True, **overrides)
    with pytest.raises(UsageError, match="--data .* differs"):
        app.train("synthetic", run_copy, resume=True)
    with pytest.raises(UsageError, match="contradict"):
        app.train(None, run_copy, resume=True, overwrite=True)
    assert snapshot(run_copy) == before                  # refused: nothing written


def test_resume_keeps_the_stored_settings_and_applies_budgets(tiny_run, run_copy):
    metrics = json.loads((tiny_run[0] / "test_metrics.json").read_text())
    result = app.train(None, run_copy, resume=True, log=lambda _: None, examples=0)
    assert result.stop_reason == "completed"             # it had finished: nothing to add
    assert json.loads((run_copy / "test_metrics.json").read_text())["bleu"] == metrics["bleu"]
    result = app.train(str(tiny_run[3]), run_copy, resume=True, log=lambda _: None,
                       epochs=5, max_minutes=3.0, seed=0, examples=0)
    config = json.loads((run_copy / "config.json").read_text())
    assert config["train"]["epochs"] == 5 and config["train"]["max_minutes"] == 3.0
    assert config["train"]["seed"] == 0 and config["model"]["hidden"] == 32
    assert result.epoch == 5 and result.global_step > 0


def test_overwrite_replaces_the_run(tiny_run, run_copy):
    (run_copy / "stray.txt").write_text("old")
    app.train(str(tiny_run[3]), run_copy, overwrite=True, log=lambda _: None,
              **{**TINY, "epochs": 1})
    assert not (run_copy / "stray.txt").exists() and (run_copy / "best.safetensors").exists()


def _weights(run):
    return load_file(str(run / "best.safetensors"))


def test_same_seed_same_weights_other_seed_other_weights(number_pairs, tmp_path):
    data = number_pairs(tmp_path / "pairs.tsv", n=120)
    tiny = {**TINY, "epochs": 1, "examples": 0}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        app.train(str(data), tmp_path / name, seed=seed, log=lambda _: None, **tiny)
    a, b, c = (_weights(tmp_path / name) for name in "abc")
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a if a[k].shape == c[k].shape)


def test_empty_sentence_and_missing_data(tiny_run, tmp_path):
    with pytest.raises(UsageError, match="empty sentence"):
        app.predict(tiny_run[0], ["Fine.", "   "])
    with pytest.raises(UsageError, match="no sentence"):
        app.predict(tiny_run[0], [])
    with pytest.raises(DataError, match="no such file"):
        app.train(str(tmp_path / "absent.tsv"), tmp_path / "run", **TINY)
    assert not (tmp_path / "run").exists()


def test_multi_reference_bleu_and_length_table():
    hyps = ["le chat noir dort ici .", "un chien"]
    one = bleu_chrf(hyps, [["le chat noir dort là ."], ["un chien"]])
    two = bleu_chrf(hyps, [["le chat noir dort là .", "le chat noir dort ici ."],
                           ["un chien"]])
    assert two["bleu"] == pytest.approx(100.0) and one["bleu"] < 100.0
    assert two["counts"]["sys_len"] == 8
    rows = by_length_table([3, 12], hyps, [["le chat noir dort ici ."], ["un chat"]])
    assert [(r["lengths"], r["n"]) for r in rows] == [("1-5", 1), ("11-15", 1)]
    assert rows[0]["bleu"] == pytest.approx(100.0)


def test_a_paragraph_comes_back_sentence_by_sentence(tiny_run, tmp_path):
    run = app.load_run(tiny_run[0])
    alone = [p.text for p in app.predict(run, ["one two .", "three four .", "five one ."])]
    text = "one two . three four .\n\nfive one ."
    p = app.predict(run, [text], attention=True)[0]
    # Each sentence translated as it is alone, joined with the input's own breaks.
    assert [q.text for q in p.sentences] == alone
    assert p.text == f"{alone[0]} {alone[1]}\n\n{alone[2]}" and p.source == text
    assert [q.source for q in p.sentences] == ["one two .", "three four .", "five one ."]
    assert p.tokens == [t for q in p.sentences for t in q.tokens]
    assert p.score == pytest.approx(sum(q.score for q in p.sentences))
    assert p.weights is None and all(q.weights.shape == (len(q.tokens), len(q.source_tokens))
                                     for q in p.sentences)
    # The figure's matrix: each sentence's block on the diagonal, zero elsewhere.
    blocks = p.shown_weights()
    first = p.sentences[0]
    np.testing.assert_array_equal(blocks[:len(first.tokens), :len(first.source_tokens)],
                                  first.weights)
    assert blocks[:len(first.tokens), len(first.source_tokens):].sum() == 0
    assert p.render(tmp_path / "para.png").stat().st_size > 1000
    row = p.to_dict()
    assert row["weights"] is None and [s["text"] for s in row["sentences"]] == alone
    # The page shows the three sentences in order, each with its own attention.
    page = app.APP.page([p], run.summary())
    assert page.index("1 of 3") < page.index("2 of 3") < page.index("3 of 3")
    # --no-split: the model reads the whole text as one sentence.
    whole = app.predict(run, [text], split=False)[0]
    assert whole.sentences is None and whole.source_tokens == p.source_tokens


def test_a_raw_pairs_file_is_evaluated_sentence_by_sentence(tiny_run, tmp_path):
    run = app.load_run(tiny_run[0])
    data = tmp_path / "raw.tsv"
    data.write_text("one two . three four .\tun deux . trois quatre .\n", encoding="utf-8")
    alone = " ".join(p.text for p in app.predict(run, ["one two .", "three four ."]))
    split = app.evaluate(run, str(data))
    joined = bleu_chrf([alone], [["un deux . trois quatre ."]])["bleu"]
    assert split["bleu"] == pytest.approx(joined)
    whole = app.predict(run, ["one two . three four ."], split=False)[0].text
    unsplit = app.evaluate(run, str(data), split=False)
    assert unsplit["bleu"] == pytest.approx(bleu_chrf([whole],
                                                      [["un deux . trois quatre ."]])["bleu"])


def test_an_align_loss_run_trains_a_head_on_links_it_keeps_for_a_resume(number_pairs, tmp_path,
                                                                       capsys):
    pytest.importorskip("eflomal")
    from attnkit.apps.translate.prepare import LINKS_FILE
    data = number_pairs(tmp_path / "pairs.tsv")
    tiny = {"arch": "transformer", "d_model": 32, "heads": 2, "layers": 2, "ff_dim": 64,
            "epochs": 2, "batch_size": 16, "lr": 1e-2, "max_minutes": None, "progress": False,
            "examples": 0, "align_loss": 0.5, "subword": 60}
    logs = []
    app.train(str(data), tmp_path / "run", log=logs.append, **tiny)
    assert (tmp_path / "run" / LINKS_FILE).is_file()
    made = next(line for line in logs if "piece links in" in line)
    assert int(made.split()[2].replace(",", "")) > 300          # about one per word
    assert stored_settings(json.loads((tmp_path / "run" / "config.json").read_text())
                           ).align_loss == 0.5
    # What the model says of a pair (predict pages, --method left out without eflomal): the
    # head it trained, where it trained it.
    from attnkit.apps.translate.alignment import align_pairs
    found = align_pairs(app.load_run(tmp_path / "run"), [["one", "two", "."]],
                        [["un", "deux", "."]], model_only=True)
    assert found.method.startswith("attention L1 H1 shift")
    # The same from the command line: --method attention alone reads the run as its pages do.
    from attnkit.cli.main import main
    (tmp_path / "a.en").write_text("one two .\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("un deux .\n", encoding="utf-8")
    assert main(["translate", "align", "--run", str(tmp_path / "run"), "--source",
                 str(tmp_path / "a.en"), "--target", str(tmp_path / "a.fr"), "--method",
                 "attention", "--out", str(tmp_path / "a.wa")]) == 0
    assert "; attention L1 H1 shift, argmax, intersection)" in capsys.readouterr().err
    # A resume reads the labels (eflomal has no seed: fitted again they would differ).
    logs.clear()
    result = app.train(None, tmp_path / "run", resume=True, epochs=3, log=logs.append)
    assert result.stop_reason == "completed" and not any("eflomal" in x for x in logs)
    (tmp_path / "run" / LINKS_FILE).write_bytes(b"not tensors")
    with pytest.raises(CheckpointError, match="unreadable alignment labels"):
        app.train(None, tmp_path / "run", resume=True, epochs=4)


@pytest.mark.parametrize("overrides, message", [
    ({"align_loss": 0.1}, "use it with --arch transformer"),
    ({"arch": "transformer", "align_loss": 0.1, "align_layer": 3, "layers": 2},
     "--align-layer 3: the decoder has 2 layers"),
])
def test_align_loss_refusals(number_pairs, tmp_path, overrides, message):
    with pytest.raises(UsageError, match=message):
        app.train(str(number_pairs(tmp_path / "pairs.tsv")), tmp_path / "run", **overrides)
    assert not (tmp_path / "run").exists()
