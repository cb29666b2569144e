"""Explanations of sentiment verdicts beside attention (rollout, gradient x input, integrated
gradients) and their faithfulness (``attnkit sentiment explain``): closed forms, completeness,
a review whose one sentiment word decides it, and the JSON line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnkit.apps.sentiment import load_run, predict, train
from attnkit.cli.main import main
from attnkit.explain.faithfulness import BINS, faithfulness
from attnkit.explain.sentiment import token_scores

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


def test_explain_names_and_stores_the_most_faithful_and_pages_open_on_it(run, tmp_path,
                                                                         capsys):
    pytest.importorskip("captum")
    import shutil

    from attnkit.apps.sentiment.trust import FAITHFULNESS, MEASURED

    folder = tmp_path / "run"
    shutil.copytree(run[0], folder)
    (folder / FAITHFULNESS).unlink(missing_ok=True)   # an earlier test measured the run
    texts = ["the film was superb and the plot", "a boring movie it was"]
    # Before any measurement: the method measured best for this app in docs/results.md.
    before = predict(folder, texts)
    assert MEASURED.method == "grad-input"
    assert all(p.shown == "grad-input" and p.why == MEASURED.why for p in before)
    assert set(before[0].explanations) == {"grad-input"}
    assert predict(folder, texts, explain="attention")[0].why is None   # asked: no sentence
    assert predict(folder, texts, attention=False)[0].explanations is None   # nothing shown

    assert main(["sentiment", "explain", "--run", str(folder), "--data", str(run[1]),
                 "--limit", "20", "--json"]) == 0
    out, err = capsys.readouterr()
    table = json.loads(out.strip().splitlines()[-1])
    methods = table["methods"]
    best = max((m for m in methods if m != "random"),
               key=lambda m: methods[m]["comprehensiveness"])
    assert table["most_faithful"] == best
    # In words: which to trust and why, with each column's direction.
    assert "comprehensiveness ↑" in out and "sufficiency ↓" in out
    assert f"trust {best}: removing the tokens it ranks first" in out
    assert json.loads((folder / FAITHFULNESS).read_text())["most_faithful"] == best
    assert f"now show {best} first" in err

    after = predict(folder, texts)
    assert all(p.shown == best for p in after)
    assert "measured on this run by attnkit sentiment explain" in after[0].why
    assert f"{methods[best]['comprehensiveness']:.3g}" in after[0].why
    row = after[0].to_dict()
    assert row["shown"] == best and row["why"] == after[0].why
    from attnkit.apps.sentiment import APP

    page = APP.page(after, {"run": "r"})
    # The page's views: the shown method's first (the page opens on its first view).
    data = json.loads(page.split('id="attnkit-data">')[1].split("</script>")[0])
    assert data["reviews"][0]["views"][0]["method"] == best
    assert "measured on this run by attnkit sentiment explain" in page


def test_explain_with_no_method_is_one_line(run, capsys):
    assert main(["sentiment", "explain", "--run", str(run[0]), "--data", str(run[1]),
                 "--methods", ","]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error: --methods names no method")


def test_a_run_that_cannot_be_written_still_prints_the_table(run, tmp_path, capsys,
                                                             monkeypatch):
    import shutil

    from attnkit.apps.sentiment import trust

    folder = tmp_path / "run"
    shutil.copytree(run[0], folder)
    (folder / trust.FAITHFULNESS).unlink(missing_ok=True)

    def refused(*_):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(trust, "write_table", refused)
    assert main(["sentiment", "explain", "--run", str(folder), "--data", str(run[1]),
                 "--limit", "10", "--methods", "attention", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["most_faithful"] == "attention"
    assert "attnkit: warning: could not store the table" in err and "Traceback" not in err
    assert not (folder / trust.FAITHFULNESS).exists()


@pytest.mark.parametrize("table", [
    {"most_faithful": "grad-input", "methods": {"grad-input": {"comprehensiveness": "high"}}},
    {"most_faithful": "grad-input", "methods": {"grad-input": {"comprehensiveness": None}}},
    {"most_faithful": "grad-input", "methods": {"grad-input": {}, "attention": 3}},
    {"methods": {}},
])
def test_a_table_edited_by_hand_counts_as_none(tmp_path, table):
    from attnkit.apps.sentiment.trust import FAITHFULNESS, MEASURED, trusted

    (tmp_path / FAITHFULNESS).write_text(json.dumps(table))
    assert trusted(tmp_path) == MEASURED
