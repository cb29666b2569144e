"""Explanations of sentiment verdicts beside attention (rollout, gradient x input, integrated
gradients) and their faithfulness (``attnkit sentiment explain``): closed forms, completeness,
a review whose one sentiment word decides it, and the JSON line."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from attnkit.apps.sentiment import load_run, predict, train
from attnkit.cli.main import main
from attnkit.explain.sentiment import BINS, faithfulness, token_scores

from .test_sentiment import write_reviews

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain")
    data = write_reviews(folder / "data", n_train=600, n_test=60)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:   # learns the task (test accuracy > 0.9 in test_sentiment.py) in a few seconds
        train(str(data), folder / "run", preset="keras2018", num_words=100, maxlen=24,
              epochs=6, lr=5e-3, progress=False, device="cpu", log=lambda _: None)
    finally:
        torch.set_num_threads(before)
    return folder / "run", data


def _batch(loaded, texts):
    reads = [loaded.pipeline.read(t) for t in texts]
    return loaded.pipeline.pad(reads)


def test_rollout_of_one_plain_layer_is_its_attention_share(run):
    loaded = load_run(run[0])
    ids, lengths = _batch(loaded, ["the film was superb", "awful plot and a boring actor"])
    rolled = token_scores(loaded.model, ids, lengths, "rollout")
    assert torch.allclose(rolled.sum(-1), torch.ones(2), atol=1e-5)
    mask = loaded.model.real_mask(lengths, ids.shape[1])
    assert (rolled[~mask] == 0).all()


def test_integrated_gradients_add_up_to_the_logit(run):
    pytest.importorskip("captum")
    model = load_run(run[0]).model
    loaded = load_run(run[0])
    ids, lengths = _batch(loaded, ["the film was superb", "awful plot and a boring actor"])
    ig = token_scores(model, ids, lengths, "integrated-gradients", steps=128)
    with torch.no_grad():
        vectors = model.token_vectors(ids, lengths)
        gap = (model.logits_from_vectors(vectors, ids, lengths)
               - model.logits_from_vectors(torch.zeros_like(vectors), ids, lengths))
        assert torch.allclose(model.logits_from_vectors(vectors, ids, lengths),
                              model(ids, lengths), atol=1e-5)
    torch.testing.assert_close(ig.sum(-1), gap, atol=0.02, rtol=0.02)
    gi = token_scores(model, ids, lengths, "grad-input")
    assert gi.shape == ids.shape and (gi[~model.real_mask(lengths, ids.shape[1])] == 0).all()


def test_the_deciding_word_carries_the_gradient(run):
    pytest.importorskip("captum")
    preds = predict(run[0], ["the film was superb and the plot", "a boring movie it was"],
                    explain="integrated-gradients,grad-input,rollout")
    for p, word in zip(preds, ("superb", "boring"), strict=True):
        assert p.shown == "integrated-gradients"
        ig = p.explanations["integrated-gradients"] * (1 if p.prob >= 0.5 else -1)
        assert p.tokens[int(np.argmax(ig))] == word
        assert set(p.explanations) == {"integrated-gradients", "grad-input", "rollout"}
    row = preds[0].to_dict()
    assert len(row["explanations"]["grad-input"]) == len(row["tokens"])


def test_faithfulness_table_and_json(run, capsys):
    pytest.importorskip("captum")
    loaded = load_run(run[0])
    texts = ["the film was superb and the plot", "a boring movie it was", "it was awful"]
    result = faithfulness(loaded.model, loaded.pipeline, texts,
                          methods=("attention", "integrated-gradients"))
    assert set(result["methods"]) == {"attention", "integrated-gradients", "random"}
    assert result["reviews"] == 3 and result["bins"] == list(BINS)
    for row in result["methods"].values():
        assert len(row["curve"]["comprehensiveness"]) == len(BINS)
        assert np.mean(row["curve"]["sufficiency"]) == pytest.approx(row["sufficiency"], abs=1e-4)
    assert main(["sentiment", "explain", "--run", str(run[0]), "--data", str(run[1]),
                 "--limit", "20", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last["methods"]) == {"attention", "rollout", "grad-input",
                                    "integrated-gradients", "random"}
    ig, rnd = last["methods"]["integrated-gradients"], last["methods"]["random"]
    # One sentiment word decides each review: removing it flips the verdict, chance rarely.
    assert ig["comprehensiveness"] > rnd["comprehensiveness"]
    assert main(["sentiment", "explain", "--run", str(run[0]), "--data", str(run[1]),
                 "--methods", "lime"]) == 2
    assert "--explain must be among" in capsys.readouterr().err


def test_pages_say_how_far_to_trust_attention_and_explain_stores_what_it_measured(
        run, tmp_path, capsys):
    """Every app alike: a page opens on attention (or the method asked first), never adds a
    method by itself, and says in one sentence what the measurement lets one trust."""
    import shutil

    from attnkit.apps.sentiment.prediction import DOCS_FIGURES, FAITHFULNESS

    folder = tmp_path / "run"
    shutil.copytree(run[0], folder)
    (folder / FAITHFULNESS).unlink(missing_ok=True)   # an earlier test measured the run
    texts = ["the film was superb and the plot", "a boring movie it was"]
    # Before any measurement: docs/results.md's figures, where the two gradient methods tie.
    before = predict(folder, texts)
    assert all(p.shown == "attention" and p.explanations is None for p in before)
    assert DOCS_FIGURES.verdict()[0] is None
    assert "no method can be trusted yet: gradient × input (0.561) and integrated gradients " \
        "(0.557) are less than 0.02 apart" in before[0].why
    assert predict(folder, texts, explain="attention")[0].why is None   # asked: no sentence
    assert predict(folder, texts, attention=False)[0].why is None       # nothing shown

    # One review: every method may tie, and nothing is trusted (it was "trust attention").
    assert main(["sentiment", "explain", "--run", str(folder), "--data", str(run[1]),
                 "--limit", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    table = json.loads(out.strip().splitlines()[-1])
    assert table["most_faithful"] is None and "trust attention" not in out
    assert "no method can be trusted yet: the measurement covers 1 reviews, fewer than the " \
        "100 a verdict needs" in out
    assert "comprehensiveness ↑" in out and "sufficiency ↓" in out
    assert "no method can be trusted yet" in err and "now show" not in err
    after = predict(folder, texts)
    assert all(p.shown == "attention" for p in after)
    assert "measured on this run by attnkit sentiment explain, 1 reviews" in after[0].why
    assert "no method can be trusted yet" in after[0].why

    # A measurement that trusts a method: the sentence names it and how to add it.
    table.update(reviews=500, most_faithful="grad-input")
    table["methods"] = {"random": {"comprehensiveness": 0.04}, "attention":
                        {"comprehensiveness": 0.25}, "grad-input": {"comprehensiveness": 0.56}}
    (folder / FAITHFULNESS).write_text(json.dumps(table))
    shown = predict(folder, texts)[0]
    assert shown.shown == "attention" and shown.explanations is None
    assert shown.why.endswith("add it with --explain grad-input.")
    row = shown.to_dict()
    assert row["shown"] == "attention" and row["why"] == shown.why
    from attnkit.apps.sentiment import APP

    page = APP.page([shown], {"run": "r"})
    assert "gradient × input is the method to trust here" in page

    # Figures that are not finite: one warning line from the command, and not shown.
    table["methods"]["attention"]["comprehensiveness"] = float("nan")
    (folder / FAITHFULNESS).write_text(json.dumps(table))
    capsys.readouterr()
    assert main(["sentiment", "predict", "--run", str(folder), "--json", *texts]) == 0
    out, err = capsys.readouterr()
    warned = [line for line in err.splitlines() if "attnkit: warning:" in line]
    assert len(warned) == 1 and "not finite numbers (attention nan)" in warned[0]
    assert all("nan" not in json.loads(line)["why"] for line in out.splitlines())


def test_trust_needs_a_lead_over_random_on_enough_reviews():
    """`sentiment explain --methods attention` where attention does no better than random,
    or where every method ties: no "trust X" line."""
    from attnkit.explain.sentiment import format_table, most_faithful

    def table(reviews, **scores):
        return {"reviews": reviews, "bins": list(BINS), "methods": {
            m: {"comprehensiveness": c, "sufficiency": 0.1} for m, c in scores.items()}}

    level = table(500, attention=0.05, random=0.05)
    assert most_faithful(level) is None
    assert "no method can be trusted yet: the best, attention (0.05), does not beat random " \
        "(0.05) by 0.02" in format_table(level)
    tied = table(500, attention=0.3, rollout=0.3, random=0.05)
    assert most_faithful(tied) is None and "trust" not in format_table(tied).splitlines()[-1][:6]
    clear = table(500, attention=0.3, rollout=0.1, random=0.05)
    assert most_faithful(clear) == "attention"
    assert format_table(clear).splitlines()[-1].startswith("trust attention: ")


def test_explain_with_no_method_is_one_line(run, capsys):
    assert main(["sentiment", "explain", "--run", str(run[0]), "--data", str(run[1]),
                 "--methods", ","]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error: --methods names no method")


def test_a_run_that_cannot_be_written_still_prints_the_table(run, tmp_path, capsys,
                                                             monkeypatch):
    import shutil

    from attnkit.apps.sentiment import explain_command
    from attnkit.apps.sentiment.prediction import FAITHFULNESS

    folder = tmp_path / "run"
    shutil.copytree(run[0], folder)
    (folder / FAITHFULNESS).unlink(missing_ok=True)

    def refused(*_):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(explain_command, "write_json", refused)
    assert main(["sentiment", "explain", "--run", str(folder), "--data", str(run[1]),
                 "--limit", "10", "--methods", "attention", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["most_faithful"] is None   # 10 reviews
    assert "attnkit: warning: could not store the table" in err and "Traceback" not in err
    assert not (folder / FAITHFULNESS).exists()


@pytest.mark.parametrize("table", [
    {"most_faithful": "grad-input", "methods": {"grad-input": {"comprehensiveness": "high"}}},
    {"most_faithful": "grad-input", "methods": {"grad-input": {"comprehensiveness": None}}},
    {"most_faithful": "grad-input", "methods": {"grad-input": {}, "attention": 3}},
    {"methods": {}},   # nothing measured: no warning
])
def test_a_table_edited_by_hand_counts_as_none(tmp_path, table):
    from attnkit.apps.sentiment.prediction import DOCS_FIGURES, FAITHFULNESS, trusted

    (tmp_path / FAITHFULNESS).write_text(json.dumps(table))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert trusted(tmp_path, ["attention"]) == trusted("/no/such/run", ["attention"])
    lines = [str(w.message) for w in caught]
    if table["methods"]:
        assert len(lines) == 1 and "faithfulness.json: it cannot be read" in lines[0]
        assert DOCS_FIGURES.source in lines[0]
    else:
        assert lines == []


@pytest.mark.parametrize(("text", "named"), [
    ('{"reviews": 500, "methods": {"attention": {"comprehensiveness": NaN}, '
     '"random": {"comprehensiveness": Infinity}}}', "(attention nan, random inf)"),
    ('{"reviews": 500, "methods": {"grad-input": {"comprehensiveness": -Infinity}}}',
     "(grad-input -inf)"),
])
def test_figures_that_are_not_finite_are_named_and_never_shown(tmp_path, text, named):
    """It was shown as it was: "↑ nan, against inf"."""
    from attnkit.apps.sentiment.prediction import FAITHFULNESS, trusted

    (tmp_path / FAITHFULNESS).write_text(text)
    with pytest.warns(UserWarning) as caught:
        trust = trusted(tmp_path, ["attention"])
    assert len(caught) == 1 and f"not finite numbers {named}" in str(caught[0].message)
    assert "nan" not in trust and "inf" not in trust.replace("info", "")
