"""Compiled decoding as a user meets it (#44): ``translate compile`` builds it once into the
user's cache; ``--compile auto`` then decodes large calls compiled, never one sentence, and
never before it is built; ``on`` builds it; the outputs are the eager model's; a build that
cannot run, or packages planted in a run folder, change nothing."""

from __future__ import annotations

import json

import pytest

from attnkit.apps.translate import load_run
from attnkit.cli.main import main
from attnkit.compiler import cache_root
from attnkit.decoding.batched import padded_sources


@pytest.fixture(scope="module")
def run(compiled_translate_run):
    return compiled_translate_run[0]


@pytest.fixture(scope="module")
def built(compiled_translate_run):
    return compiled_translate_run[1]


SENTENCES = ["one two three .", "four .", "five six seven eight one .", "two", "three one ."]


def test_compiled_translations_are_the_eager_ones(run, built, monkeypatch, capsys,
                                                  greedy_margin):
    monkeypatch.setenv("ATTNKIT_CACHE", str(built))
    many = SENTENCES * 14                                     # 70 >= AUTO_MIN_SENTENCES
    eager = load_run(run, compile="off").engine
    fast = load_run(run, compile="auto").engine
    # Exact equality across Inductor's and eager's kernels, whose float32 results differ by
    # ~1e-6 on every ISA (AVX2, AVX512, AMX): it holds where no greedy choice lies that close,
    # and the run trained on this CPU is asserted to keep its closest one far wider.
    ids = [ids for _, ids, _ in eager.read(SENTENCES, False)[0]]
    assert greedy_margin(eager.model, [padded_sources(ids, eager.model.config.pad_id)]) > 1e-3
    for beam in (1, 3):
        want = [p.text for p in eager.translate(many, beam=beam)]
        assert [p.text for p in fast.translate(many, beam=beam)] == want
        assert fast.path == "compiled"
        assert [p.text for p in fast.translate(SENTENCES[3:4], beam=beam)] == want[3:4]
    capsys.readouterr()


def test_auto_never_waits_for_a_compile(run, tmp_path, monkeypatch, built):
    monkeypatch.setenv("ATTNKIT_CACHE", str(built))
    engine = load_run(run, compile="auto").engine
    engine.translate(SENTENCES)                   # a few sentences: eager, nothing loaded
    assert engine.path == "eager"
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "empty"))
    engine = load_run(run, compile="auto").engine
    engine.translate(SENTENCES * 20)              # many, but nothing built: eager
    assert engine.path == "eager" and not (tmp_path / "empty").exists()


def test_eval_with_compile_on_scores_as_eager(run, built, monkeypatch, capsys):
    monkeypatch.setenv("ATTNKIT_CACHE", str(built))
    scores = {}
    for mode in ("off", "on"):
        assert main(["translate", "eval", "--run", str(run), "--compile", mode, "--beam", "2",
                     "--json"]) == 0
        scores[mode] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["bleu"]
    assert scores["on"] == scores["off"]


def test_a_build_that_cannot_run_stays_eager(run, tmp_path, monkeypatch, capsys):
    import torch._inductor.config as inductor

    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path))
    engine = load_run(run, compile="on").engine
    want = [p.text for p in load_run(run, compile="off").engine.translate(SENTENCES)]
    with inductor.patch({"cpp.cxx": ("/no/such/compiler",)}):
        got = [p.text for p in engine.translate(SENTENCES)]
    assert got == want and engine.path == "eager"
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warned) == 1 and "could not be compiled" in warned[0]


def test_packages_in_a_run_folder_are_never_loaded(run, tmp_path, monkeypatch, built):
    """Packages are code: a copy of the user's cache planted in the run is ignored."""
    import shutil

    planted = run / "compiled"
    shutil.copytree(built / "compiled", planted)
    try:
        monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "empty"))
        engine = load_run(run, compile="auto").engine
        engine.translate(SENTENCES * 20)
        assert engine.path == "eager"
        assert engine.packages().folder.parent == cache_root() != planted
    finally:
        shutil.rmtree(planted)


def test_an_rnn_run_is_not_compiled(number_pairs, tmp_path, capsys):
    number_pairs(tmp_path / "pairs.tsv", n=60, seed=0, words=5, max_words=3)
    assert main(["translate", "train", "--data", str(tmp_path / "pairs.tsv"), "--out",
                 str(tmp_path / "rnn"), "--epochs", "1", "--hidden", "16", "--emb-dim", "8",
                 "--no-progress", "--examples", "0"]) == 0
    capsys.readouterr()
    assert main(["translate", "compile", str(tmp_path / "rnn")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an RNN run" in err[0]
