"""Translation token by token (`TranslateApp.stream`): the streamed tokens and rows are the
greedy translation's, and each sentence ends with the same prediction ``predict`` returns.

Tokens are compared exactly; attention rows (softmax outputs in [0, 1]) to ``1e-5`` and scores
(sums of about 20 log-probabilities) to ``1e-4``: a stream decodes other batches than
``predict`` (other rows, other padding), so float32 kernels block the sums differently, and
how depends on the CPU's kernels (AVX2, AVX512, AMX). Each step's difference is a few float32
ulps (about 1e-7 for a weight, 1e-6 for a log-probability), well inside both tolerances on
each CPU; no bf16 is involved (decoding runs in float32 everywhere).
"""

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
    # split=False: "I am cold . I am cold ." is one sentence to it.
    whole = app.predict(loaded, inputs, attention=attention, split=False)
    tokens = {i: [] for i in range(len(inputs))}
    finished = {}
    for k, step in enumerate(app.stream(loaded, inputs, attention=attention, split=False)):
        if k == 0:
            assert {i: s.source_tokens for i, s in step.sources.items()} == \
                {i: p.source_tokens for i, p in enumerate(whole)}
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


@pytest.mark.parametrize("name", ["rnn", "tf"])
def test_texts_stream_sentence_after_sentence_like_predict(runs, name, one_thread):
    loaded = runs[0][name]
    texts = ["I am cold. The cat is black.\n\nShe will find the dogs.", "I am cold."]
    want = app.predict(loaded, texts)
    assert len(want[0].sentences) == 3 and not want[1].sentences
    seen, finished = [], {}
    for step in app.stream(loaded, texts):
        seen += [("start", i, s.sentence) for i, s in step.sources.items()]
        seen += [("token", t.sentence, t.part) for t in step.tokens]
        finished.update(step.finished)
    # Each text's sentences in order: a sentence starts after its previous one's tokens.
    for i in range(2):
        parts = [p for kind, j, p in seen if j == i]
        assert parts == sorted(parts) and parts[0] == 0
    assert [p for kind, j, p in seen if kind == "start" and j == 0] == [0, 1, 2]
    assert finished[0].text == want[0].text and finished[1].text == want[1].text
    assert [p.tokens for p in finished[0].sentences] == [p.tokens for p in want[0].sentences]
    for got, p in zip(finished[0].sentences, want[0].sentences, strict=True):
        np.testing.assert_allclose(got.weights, p.weights, atol=1e-5)
    assert [t for kind, j, t in seen if kind == "token" and j == 0].count(2) == \
        len(want[0].sentences[2].tokens)
