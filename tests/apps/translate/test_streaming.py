"""Translation token by token (`TranslateApp.stream`): the streamed tokens and rows are the
greedy translation's, and each sentence ends with the same prediction ``predict`` returns."""

import numpy as np
import pytest
import torch

from attnkit.apps import APPS
from attnkit.errors import UsageError

app = APPS["translate"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny bi-GRU and a tiny Transformer, trained once for the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        folder = tmp_path_factory.mktemp("stream")
        tiny = app.tiny(folder)
        quiet = {"log": lambda _: None}
        app.train(tiny.settings, folder / "rnn", **quiet)
        rnn_only = {k: v for k, v in tiny.settings.items() if k not in ("hidden", "emb_dim")}
        app.train({**rnn_only, "arch": "transformer", "d_model": 16, "heads": 2,
                   "layers": 1, "ff_dim": 32}, folder / "tf", **quiet)
        yield {"rnn": app.load(folder / "rnn"), "tf": app.load(folder / "tf")}, tiny.inputs
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["rnn", "tf"])
@pytest.mark.parametrize("attention", [True, "all", False])
def test_stream_is_greedy_translation_token_by_token(runs, name, attention, one_thread):
    loaded, inputs = runs[0][name], runs[1] + ["the cat", "I am cold . I am cold ."]
    # A stream reads each text whole: "I am cold . I am cold ." is one sentence to it.
    whole = app.predict(loaded, inputs, attention=attention, split=False)
    tokens = {i: [] for i in range(len(inputs))}
    finished = {}
    for k, step in enumerate(app.stream(loaded, inputs, attention=attention)):
        if k == 0:
            assert step.sources == {i: p.source_tokens for i, p in enumerate(whole)}
        else:
            assert step.sources == {}
        assert len({t.sentence for t in step.tokens}) == len(step.tokens)  # one per sentence
        for t in step.tokens:
            assert t.sentence not in finished and t.position == len(tokens[t.sentence])
            tokens[t.sentence].append(t)
        for i, pred in step.finished.items():
            assert i not in finished
            finished[i] = pred
    assert sorted(finished) == list(range(len(inputs)))
    for i, p in enumerate(whole):
        streamed = finished[i]
        assert streamed.tokens == p.tokens == [t.token for t in tokens[i]]
        assert streamed.text == p.text and streamed.score == pytest.approx(p.score, abs=1e-4)
        if not attention:
            assert p.weights is None and all(t.weights is None for t in tokens[i])
            continue
        np.testing.assert_allclose(streamed.weights, p.weights, atol=1e-5)
        if p.tokens:
            np.testing.assert_allclose(np.stack([t.weights for t in tokens[i]]), p.weights,
                                       atol=1e-5)
        if attention == "all" and name == "tf":
            np.testing.assert_allclose(streamed.layer_weights, p.layer_weights, atol=1e-5)


def test_a_bad_sentence_is_refused_before_any_decoding(runs):
    loaded = runs[0]["rnn"]
    with pytest.raises(UsageError, match="input 2"):
        app.stream(loaded, ["I am cold.", "   "])
    with pytest.raises(UsageError, match="not one string"):
        app.stream(loaded, "I am cold.")
    with pytest.raises(UsageError, match="no sentence"):
        app.stream(loaded, [])
