"""The translate app's recipe options: joint subwords, token batches, schedules, and the
one-reference-per-line BLEU next to the multi-reference one."""

import json
import random
from types import SimpleNamespace

import pytest
import sacrebleu
import torch

from attnkit.apps import translate as app
from attnkit.apps.translate.evaluation import format_table
from attnkit.bleu import translation_scores
from attnkit.cli.main import main
from attnkit.data.pairs import group_references
from attnkit.data.subword import SubwordModel
from attnkit.data.text_codec import SRC_LANG, word_count
from attnkit.errors import CheckpointError, UsageError

WORDS = {"one": "un", "two": "deux", "three": "trois", "four": "quatre", "five": "cinq",
         "six": "six", "seven": "sept", "eight": "huit", "nine": "neuf", "ten": "dix"}




@pytest.fixture(scope="module")
def subword_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subword")
    rng = random.Random(3)
    lines = []
    for _ in range(300):
        en = rng.choices(list(WORDS), k=rng.randint(2, 5))
        lines.append(" ".join(en) + " .\t" + " ".join(WORDS[w] for w in en) + " .")
    (folder / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    app.train(str(folder / "pairs.tsv"), folder / "run", hidden=32, emb_dim=16, epochs=4,
              batch_size=16, lr=1e-2, max_minutes=None, progress=False, examples=1,
              subword=40, batch_tokens=64, schedule="cosine", warmup=5, log=lambda _: None)
    torch.set_num_threads(before)
    metrics = json.loads((folder / "run" / "test_metrics.json").read_text())
    return folder / "run", metrics


def test_subword_run_files_and_joint_vocabulary(subword_run):
    run, metrics = subword_run
    assert (run / app.SUBWORD_FILE).is_file()
    config = json.loads((run / "config.json").read_text())
    assert config["options"]["subword"] == 40 and config["options"]["batch_tokens"] == 64
    assert config["train"]["schedule"] == "cosine" and config["train"]["warmup_steps"] == 5
    assert (run / "vocab_src.json").read_text() == (run / "vocab_tgt.json").read_text()
    assert config["model"]["src_vocab"] == config["model"]["tgt_vocab"]
    assert metrics["bleu"] > 15   # learnt number words through their pieces (untrained: ~0)


def test_reloaded_run_uses_its_sentencepiece_model(subword_run):
    run, metrics = subword_run
    sp = SubwordModel(run / app.SUBWORD_FILE)
    out = app.predict(run, ["one two three ."])[0]
    assert out.source_tokens == sp.encode("one two three .")
    assert out.text == sp.decode(out.tokens)          # pieces joined back into words
    assert out.weights.shape == (len(out.tokens), len(out.source_tokens))
    assert app.evaluate(run)["bleu"] == metrics["bleu"]
    capped = app.predict(run, [" ".join(["seven"] * 30_000)])[0]   # pieces are capped too
    assert len(capped.source_tokens) == app.RNN_MAX_SOURCE and capped.truncated > 0


def test_missing_sentencepiece_model_is_a_checkpoint_error(subword_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(subword_run[0], copy)
    (copy / app.SUBWORD_FILE).unlink()
    with pytest.raises(CheckpointError, match="sentencepiece model is missing"):
        app.load_run(copy)


def test_shared_transformer_embeddings_with_subwords(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a} {b} .\t{WORDS[a]} {WORDS[b]} .\n"
                             for a in WORDS for b in WORDS), encoding="utf-8")
    app.train(str(pairs), tmp_path / "run", arch="transformer", d_model=16, heads=2,
              layers=1, ff_dim=32, epochs=1, batch_size=32, max_minutes=None, progress=False,
              examples=0, subword=40, log=lambda _: None)
    run = app.load_run(tmp_path / "run")
    model = run.model
    assert model.config.share_embeddings
    assert model.src_embedding.weight is model.tgt_embedding.weight
    assert run.pipeline.max_source == model.config.max_len   # the positional table caps it
    with pytest.raises(UsageError, match="--max-len 600 does not fit"):
        app.train(str(pairs), tmp_path / "other", arch="transformer", max_len=600,
                  log=lambda _: None)


def test_single_reference_bleu_counts_every_line():
    pairs = [("I am cold .", "J'ai froid ."), ("I am cold .", "J'ai très froid ."),
             ("The cat sleeps here today .", "Le chat dort ici aujourd'hui ."),
             ("Go .", "Va !")]
    outs = {"I am cold .": "J'ai très froid .", "The cat sleeps here today .":
            "Le chat dort ici .", "Go .": "Va !"}
    groups = group_references(pairs)
    metrics = translation_scores([outs[en] for en, _ in groups], [refs for _, refs in groups],
                                 [word_count(en, SRC_LANG) for en, _ in groups])
    # Independent computation with sacrebleu: each line against its own reference only ...
    hyps = [outs[en] for en, _ in pairs]
    single = sacrebleu.corpus_bleu(hyps, [[fr for _, fr in pairs]])
    assert metrics["single_ref"]["bleu"] == pytest.approx(single.score)
    assert metrics["single_ref"]["lines"] == 4
    # ... and each distinct source once against all its references.
    multi = sacrebleu.corpus_bleu([outs["I am cold ."], outs["The cat sleeps here today ."],
                                   "Va !"], [["J'ai froid .", "Le chat dort ici aujourd'hui .",
                                              "Va !"], ["J'ai très froid .", None, None]])
    assert metrics["bleu"] == pytest.approx(multi.score)
    assert metrics["single_ref"]["bleu"] < metrics["bleu"]
    rows = {r["lengths"]: r for r in metrics["by_length"]}
    assert rows["1-5"]["n"] == 2 and rows["1-5"]["lines"] == 3
    assert rows["6-10"]["bleu_single_ref"] == pytest.approx(sacrebleu.corpus_bleu(
        ["Le chat dort ici ."], [["Le chat dort ici aujourd'hui ."]]).score, abs=0.01)
    metrics.update(sentences=3, references=4, beam=1, sentences_per_s=10.0, decode_seconds=0.3)
    assert "one reference per line" in format_table(metrics)


def test_cli_passes_the_recipe_options(monkeypatch):
    seen = {}
    monkeypatch.setattr(app.APP, "train", lambda given, out, **kw: seen.update(given) or
                        SimpleNamespace(stop_reason="signal", signal="SIGTERM"))
    assert main(["translate", "train", "--data", "x", "--out", "r", "--arch", "transformer",
                 "--subword", "8000", "--batch-tokens", "2000", "--schedule", "cosine",
                 "--warmup", "100", "--eval-every", "50", "--amp", "on", "--ff-dim", "512",
                 "--dropout", "0", "--strict"]) == 143
    assert seen["subword"] == 8000 and seen["batch_tokens"] == 2000
    assert seen["schedule"] == "cosine" and seen["warmup"] == 100
    assert seen["eval_every"] == 50 and seen["amp"] is True and seen["strict"] is True
    assert seen["ff_dim"] == 512 and seen["dropout"] == 0
    assert "hidden" not in seen and "seed" not in seen      # not given: left to the app
