"""``attnkit translate align`` on a tiny Transformer run of number words (word for word, so
the gold alignment is the diagonal), eflomal and the data it learns from,
``predict --explain`` / ``--alignments``, and every input mistake as one error line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnkit.apps import translate as app
from attnkit.cli.main import main

TINY = {"arch": "transformer", "d_model": 32, "heads": 2, "layers": 2, "ff_dim": 64,
        "dropout": 0.0, "subword": 40, "epochs": 12, "batch_size": 16, "lr": 5e-3, "warmup": 10,
        "max_minutes": None, "progress": False, "examples": 1}
EN = ["one two three .", "four five six seven .", "ten nine .", "eight one two six ."]
FR = ["un deux trois .", "quatre cinq six sept .", "dix neuf .", "huit un deux six ."]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread is the fastest (conftest's ``one_thread``)."""


@pytest.fixture(scope="module")
def tf_run(number_pairs, tmp_path_factory):
    pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("align")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    app.train(str(number_pairs(folder / "pairs.tsv", seed=5)), folder / "run",
              log=lambda _: None, **TINY)
    torch.set_num_threads(before)
    return folder / "run"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.en").write_text("\n".join(EN) + "\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("\n".join(FR) + "\n", encoding="utf-8")
    gold = [f"{k} {i} {i} S" for k, line in enumerate(EN, 1)
            for i in range(1, len(line.split()) + 1)]
    (tmp_path / "a.wa").write_text("\n".join(gold) + "\n", encoding="utf-8")
    return tmp_path


def _align(run, files, *extra):
    return main(["translate", "align", "--run", str(run), "--source", str(files / "a.en"),
                 "--target", str(files / "a.fr"), *extra])


def test_align_writes_pharaoh_and_scores_gold(tf_run, files, capsys):
    assert _align(tf_run, files, "--method", "attention", "--out", str(files / "o.wa"),
                  "--gold", str(files / "a.wa"), "--json") == 0
    out = capsys.readouterr().out
    scores = json.loads(out.strip().splitlines()[-1])
    assert set(scores) >= {"precision", "recall", "aer", "links", "pairs", "method"}
    lines = (files / "o.wa").read_text().splitlines()
    assert len(lines) == 4
    for line, en, fr in zip(lines, EN, FR, strict=True):
        links = {tuple(map(int, x.split("-"))) for x in line.split()}
        assert all(i < len(en.split()) and j < len(fr.split()) for i, j in links)
        assert {j for _, j in links} == set(range(len(fr.split())))     # argmax: every word
    assert _align(tf_run, files, "--method", "attention", "--layer", "2", "--head", "1",
                  "--shift", "--symmetrize", "grow-diag-final-and") == 0
    assert len(capsys.readouterr().out.splitlines()) == 4                # links on stdout


def test_align_python_api_keeps_token_indices(tf_run):
    from attnkit.apps.translate.alignment import Method, align_pairs, check_pairs

    loaded = app.load_run(tf_run)
    src, tgt = check_pairs(["one two ."], ["un deux ."])
    res = align_pairs(loaded, src, tgt, method=Method("attention", layer="avg", head="avg"))
    assert res.words[0].shape == (3, 3) and np.allclose(res.words[0].sum(1), 1, atol=1e-5)
    assert res.pairs[0].src_tokens == ["one", "two", "."]
    rollout = align_pairs(loaded, src, tgt, method=Method("rollout"))
    assert not np.allclose(rollout.words[0], res.words[0])


@pytest.mark.parametrize("change, message", [
    (lambda d: (d / "a.fr").write_text("un deux .\n", encoding="utf-8"),
     "a.en has 4 lines but the target file"),
    (lambda d: (d / "a.en").write_text("one .\n\nten .\nsix .\n", encoding="utf-8"),
     "line 2 of the source file"),
    (lambda d: (d / "a.wa").write_text("1 9 1 S\n", encoding="utf-8"),
     "sentence 1 has 4 English tokens; the link names token 9"),
])
def test_bad_input_is_one_line(tf_run, files, capsys, change, message):
    change(files)
    assert _align(tf_run, files, "--gold", str(files / "a.wa")) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_run_without_attention_is_refused(number_pairs, tmp_path, files, capsys):
    run = tmp_path / "none"
    app.train(str(number_pairs(tmp_path / "p.tsv", n=40)), run, log=lambda _: None,
              attention="none", hidden=8, emb_dim=8, epochs=1, max_minutes=None,
              progress=False, examples=0)
    assert _align(run, files, "--method", "attention") == 2
    assert "no attention (attention='none')" in capsys.readouterr().err


def test_unknown_words_warn_and_suggestions_fit_the_run(number_pairs, tf_run, tmp_path, files,
                                                       capsys):
    run = tmp_path / "rnn"
    app.train(str(number_pairs(tmp_path / "p.tsv", n=200)), run, log=lambda _: None,
              hidden=8, emb_dim=8, epochs=1, max_minutes=None, progress=False, examples=0)
    (tmp_path / "u.en").write_text("one two zebra .\nthree apple .\n", encoding="utf-8")
    (tmp_path / "u.fr").write_text("un deux zèbre .\ntrois pomme .\n", encoding="utf-8")
    # As written (the number words are lower-case: the default would capitalise "One").
    assert main(["translate", "align", "--run", str(run), "--source", str(tmp_path / "u.en"),
                 "--target", str(tmp_path / "u.fr"), "--no-normalize", "--method",
                 "attention"]) == 0
    # 2 of the 7 words on each side are not in the run's vocabularies: 29% > 10%.
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "attnkit: warning: 29% of the source words and 29% of the target words are unknown")
    assert _align(run, files, "--no-normalize", "--method", "attention") == 0
    assert "warning" not in capsys.readouterr().err            # every word known


def test_eflomal_is_the_default(tf_run, files, capsys):
    """eflomal, fitted on the pairs and the run's training pairs, its directions intersected:
    the best on the WPT03 trial set; the other methods' settings are refused with it."""
    pytest.importorskip("eflomal")
    assert _align(tf_run, files, "--gold", str(files / "a.wa"), "--out", str(files / "e.wa")) == 0
    captured = capsys.readouterr()
    assert "eflomal, intersection" in captured.out
    assert "attnkit: note: eflomal (12 samplers) on the 4 pairs and" in captured.err
    for line, en, fr in zip((files / "e.wa").read_text().splitlines(), EN, FR, strict=True):
        links = {tuple(map(int, x.split("-"))) for x in line.split()}
        assert links and all(i < len(en.split()) and j < len(fr.split()) for i, j in links)
    assert _align(tf_run, files, "--method", "eflomal", "--symmetrize", "none", "--gold",
                  str(files / "a.wa")) == 0
    assert "eflomal, forward" in capsys.readouterr().err
    for flags, message in ((("--extraction", "argmax"), "eflomal gives links, not weights"),
                           (("--method", "eflomal", "--shift"), "--shift reads attention")):
        _one_line(capsys, _align(tf_run, files, *flags), message)


def test_eflomal_learns_from_the_run_data_or_the_data_given(tf_run, number_pairs, tmp_path,
                                                            files, capsys):
    """A run moved away from its training data: eflomal's default says so in one line and
    names --eflomal-data, which gives it the pairs to learn from."""
    pytest.importorskip("eflomal")
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tf_run, run)
    config = json.loads((run / "config.json").read_text())
    config["data"] = {"kind": "file", "path": str(tmp_path / "moved.tsv"), "split_seed": 0}
    (run / "config.json").write_text(json.dumps(config))
    _one_line(capsys, _align(run, files), "eflomal reads the run's training data and cannot")
    data = number_pairs(tmp_path / "other.tsv", n=40)
    assert _align(run, files, "--eflomal-data", str(data), "--gold", str(files / "a.wa")) == 0
    # A pairs file is split as training data is: its 80% training split.
    assert "eflomal (12 samplers) on the 4 pairs and 32 training pairs" in capsys.readouterr().err


def test_predict_explanations_and_alignments(tf_run, tmp_path, capsys):
    pytest.importorskip("captum")
    assert main(["translate", "predict", "--run", str(tf_run), "one two three .",
                 "--explain", "integrated-gradients,rollout", "--alignments", "--json",
                 "--html", str(tmp_path / "p.html")]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    t, s = len(row["tokens"]), len(row["source_tokens"])
    for name in ("integrated-gradients", "rollout"):
        m = np.array(row["explanations"][name])
        assert m.shape == (t, s) and np.allclose(m.sum(1), 1, atol=1e-3)
    assert row["alignment"] and row["alignment_method"]
    page = (tmp_path / "p.html").read_text()
    assert 'id="method"' in page and '"integrated-gradients":{' in page


def test_integrated_gradients_add_up_to_the_log_probability(tf_run):
    pytest.importorskip("captum")
    from attnkit.alignment.aligner import attribution_rows, pair_pieces
    from attnkit.decoding.forced import forced_decode, teacher_forced_logprobs

    loaded = app.load_run(tf_run)
    model, pair = loaded.model, pair_pieces(loaded.pipeline, ["one", "two", "."],
                                            ["un", "deux", "."])
    signed = attribution_rows(model, pair.src_ids, pair.tgt_ids, "integrated-gradients",
                              signed=True, steps=64)
    full = forced_decode(model, [pair.src_ids], [pair.tgt_ids])[0].logprobs[:-1]
    c, n = model.config, len(pair.tgt_ids)
    with torch.no_grad():   # the baseline: all-zero source embeddings
        state = model.encode(torch.tensor([pair.src_ids]), torch.tensor([len(pair.src_ids)]),
                             use_cache=False, embedded=torch.zeros(1, len(pair.src_ids), 32))
        logp = teacher_forced_logprobs(model, state, torch.tensor([[c.bos_id, *pair.tgt_ids]]))
        base = logp[0, :n].gather(-1, torch.tensor(pair.tgt_ids)[:, None])[:, 0]
    torch.testing.assert_close(signed.sum(-1), full - base, atol=0.05, rtol=0.05)


def test_gradient_methods_hold_a_bounded_number_of_tokens_a_pass(tf_run, monkeypatch):
    """#47: grad-input explained every target piece in one pass over copies of the whole pair
    (a 200-token pair took 7.5 GB, 10,000 tokens the whole machine). Passes of at most
    ATTRIBUTION_TOKENS tokens give the same matrix."""
    pytest.importorskip("captum")
    import captum.attr

    from attnkit.alignment import aligner

    loaded = app.load_run(tf_run)
    words = "one two three four five six seven eight nine .".split()
    pair = aligner.pair_pieces(loaded.pipeline, words, words)
    whole = aligner.attribution_rows(loaded.model, pair.src_ids, pair.tgt_ids, "grad-input")
    seen = []
    attribute = captum.attr.InputXGradient.attribute

    def counted(self, inputs, **kw):
        seen.append(inputs.shape[0] * (len(pair.src_ids) + len(pair.tgt_ids)))
        return attribute(self, inputs, **kw)

    monkeypatch.setattr(captum.attr.InputXGradient, "attribute", counted)
    monkeypatch.setattr(aligner, "ATTRIBUTION_TOKENS", 150)
    parts = aligner.attribution_rows(loaded.model, pair.src_ids, pair.tgt_ids, "grad-input")
    assert len(seen) > 1 and max(seen) <= 150
    torch.testing.assert_close(parts, whole, atol=1e-5, rtol=1e-4)


def _one_line(capsys, code, *needles):
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("attnkit: error:"), err
    assert "Traceback" not in err and all(n in err for n in needles), err


def test_endless_or_huge_inputs_are_one_line(tf_run, files, capsys, monkeypatch):
    """``/dev/zero`` as the sentences or the gold links: one line once the cap is read, not an
    endless read; a file past the line cap: one line."""
    from attnkit import fileio

    monkeypatch.setattr(fileio, "MAX_TEXT_BYTES", 1 << 20)     # the cap, smaller: fast
    for flag in ("--source", "--target", "--gold"):
        paths = {"--source": files / "a.en", "--target": files / "a.fr", "--gold": None,
                 flag: "/dev/zero"}
        argv = ["translate", "align", "--run", str(tf_run)]
        argv += [x for f, p in paths.items() if p is not None for x in (f, str(p))]
        _one_line(capsys, main(argv), "/dev/zero", "more than 1,048,576 bytes")
    monkeypatch.setattr(fileio, "MAX_TEXT_LINES", 3)
    _one_line(capsys, _align(tf_run, files), "a.en", "more than 3 lines")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_threshold_that_is_no_number_is_refused(tf_run, files, capsys, value):
    _one_line(capsys, _align(tf_run, files, "--method", "attention", "--extraction",
                             "threshold", f"--threshold={value}"),
              "--threshold must be a finite number")


def test_align_killed_leaves_no_temporary_folder(tf_run, tmp_path, files, capsys, monkeypatch):
    """SIGTERM while eflomal runs: exit 143 in one line, and eflomal's temporary folder (and
    its own files) are gone."""
    eflomal = pytest.importorskip("eflomal")
    import os
    import shutil
    import signal
    import tempfile

    run, temp = tmp_path / "run", tmp_path / "temp"
    shutil.copytree(tf_run, run)
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    seen = []

    def align_then_killed(self, *args, **kwargs):
        seen.extend(temp.iterdir())
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(eflomal.Aligner, "align", align_then_killed)
    capsys.readouterr()
    assert _align(run, files) == 143
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "attnkit: interrupted by SIGTERM" and "Traceback" not in "\n".join(err)
    assert [p.name for p in seen if p.name.startswith("attnkit-eflomal-")]   # it was there
    assert list(temp.iterdir()) == []
