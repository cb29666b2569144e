"""A translation as people see it (no model): whole words where the model read pieces, their
attention gathered, and the warning when the run cannot read the input or its own output
gives it away (a loop, a low confidence)."""

import json
import math

import numpy as np
import pytest

from attnkit.apps.translate.page import predictions_page
from attnkit.apps.translate.prediction import (
    LOW_CONFIDENCE,
    TranslationPrediction,
    repeated,
)

M = "\u2581"


def _pred(source="one two", tokens=("un", "deux"), score=None, **kw):
    tokens = list(tokens)
    score = math.log(0.9) * (len(tokens) + 1) if score is None else score
    return TranslationPrediction(source, source.split(), tokens, " ".join(tokens), None, score,
                                 **kw)


def test_a_subword_prediction_shows_words_with_summed_sources_and_averaged_rows():
    # "Nous partons" read as ▁Nou s ▁part ons, written as ▁We ▁le ave.
    src, out = [f"{M}Nou", "s", f"{M}part", "ons"], [f"{M}We", f"{M}le", "ave"]
    w = np.array([[0.4, 0.4, 0.1, 0.1],
                  [0.1, 0.1, 0.5, 0.3],
                  [0.0, 0.2, 0.2, 0.6]], np.float32)
    p = TranslationPrediction("Nous partons", src, out, "We leave", w, -1.0, subword=True,
                              piece_links=[(0, 0), (3, 2)])
    words = p.words()
    assert (words.source, words.target) == (["Nous", "partons"], ["We", "leave"])
    np.testing.assert_allclose(words.matrix(w), [[0.8, 0.2], [0.2, 0.8]], atol=1e-6)
    # The page outlines the piece links as word links.
    page = predictions_page([p], {}).split('id="attnkit-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(page)["examples"][0]["links"] == [[0, 0], [1, 1]]
    row = p.to_dict()
    assert row["tokens"] == ["We", "leave"] and row["source_tokens"] == ["Nous", "partons"]
    assert M not in str(row)
    # A word run's tokens are its words: nothing joined.
    plain = TranslationPrediction("a b", ["a", "b"], ["x"], "x", np.ones((1, 2)) / 2, -1.0)
    assert plain.words().source == ["a", "b"] and plain.to_dict()["weights"] == [[0.5, 0.5]]


@pytest.mark.parametrize(("tokens", "source", "found"), [
    (["l'", "é", "rd", *["i"] * 12, "-"], "one two", "'i' 12 times"),
    (["ai", "-", "-", "-", "-", "-", "Br"], "one", "'-' 5 times"),
    (["la", "maison", "la", "maison", "la", "maison"], "the house", "'lamaison' 3 times"),
    (["il", "a", "dit", "non", "."], "he said no", None),
    (["aller", "aller", "aller"], "go", None),                 # three: not yet a loop
    (["1", "1", "1", "1"], "My PIN is 1111.", None),           # the source repeats it too
])
def test_a_decoder_stuck_in_a_loop_is_found(tokens, source, found):
    assert repeated(tokens, source) == found


def test_one_warning_line_says_what_is_wrong():
    assert _pred().warning() is None
    unknown = _pred("Zorblat met Quenthiva in Plimbury", unknown=0.8,
                    unknown_words=["zorblat", "quenthiva", "plimbury", "zorblat"],
                    word_count=5)
    line = unknown.warning()
    assert line.startswith("4 of the 5 words it read are unknown to the run (zorblat, "
                           "quenthiva, plimbury): ")
    assert line.endswith("it can only guess them (use a run trained on text like it)")
    loop = _pred(tokens=["l'", *["i"] * 10])
    assert "its output repeats 'i' 10 times" in loop.warning()
    unsure = _pred(score=math.log(LOW_CONFIDENCE / 2) * 3)
    assert "the model is unsure of its output (a mean probability of 0.13 per token)" in \
        unsure.warning()
    both = _pred(tokens=["l'", *["i"] * 10], unknown=0.5, unknown_words=["xqzt"],
                 word_count=2)
    assert "\n" not in both.warning() and both.warning().count(": the translation") == 1
    assert both.warning().endswith("the translation is likely wrong (use a run trained on "
                                   "text like it)")
    # One unknown word in twenty: a note, not a warning.
    few = _pred(unknown=0.05, unknown_words=["zorblat"], word_count=20)
    assert few.warning() is None
    assert few.note() == "1 of the 20 words it read is unknown to the run (zorblat)"


def test_a_paragraph_warns_on_the_sentence_that_went_wrong():
    good, bad = _pred(), _pred(tokens=["l'", *["i"] * 10])
    whole = TranslationPrediction.paragraph("one two. one two.", [good, bad], "un deux. l'i...")
    assert "its output repeats 'i' 10 times (sentence 2)" in whole.warning()
    assert whole.unknown == 0 and whole.to_dict()["warning"] == whole.warning()
