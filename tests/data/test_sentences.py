"""Texts cut into sentences and joined back with their breaks (`attnkit.data.sentences`)."""

import pytest

from attnkit.data.sentences import Sentences, per_sentence, readable_sentences, split_sentences


@pytest.mark.parametrize("text, sentences, breaks", [
    ("The cat is black. My friends do not like the white horse. She will find the dogs.",
     ["The cat is black.", "My friends do not like the white horse.",
      "She will find the dogs."], [" ", " "]),
    # A line break stays one, a blank line (even one holding spaces) is a new paragraph.
    ("Then he left.\nA new line here.\n \n\nMr. Smith came.",
     ["Then he left.", "A new line here.", "Mr. Smith came."], ["\n", "\n\n"]),
    ("A.\n\n\nB.", ["A.", "B."], ["\n\n"]),
    # Abbreviations and decimals are not sentence ends.
    ("It costs 3.5 euros, e.g. in Paris. Yes!", ["It costs 3.5 euros, e.g. in Paris.", "Yes!"],
     [" "]),
    ("  I am cold.  ", ["I am cold."], []),
    ("no full stop\nbut a line break", ["no full stop\nbut a line break"], []),
    ("   \n\n ", [], []),
])
def test_split(text, sentences, breaks):
    found = split_sentences(text)
    assert found.sentences == sentences and found.breaks == breaks


def test_join_puts_the_breaks_back():
    found = split_sentences("One. Two.\nThree.\n\nFour.")
    assert found.join(["1.", "2.", "3.", "4."]) == "1. 2.\n3.\n\n4."
    assert Sentences(["a"], []).join(["x"]) == "x"
    with pytest.raises(ValueError, match="2 parts for 1 sentences"):
        Sentences(["a"], []).join(["x", "y"])


def test_readable_sentences_drop_the_unreadable_and_keep_the_wider_break():
    text = "The cat is black.\n\nHmm. She will find the dogs."
    found = readable_sentences(text, "en", lambda s: s != "Hmm.")
    assert found == Sentences(["The cat is black.", "She will find the dogs."], ["\n\n"])
    assert readable_sentences("The cat is black.", "en", bool) is None
    assert readable_sentences(text, "en", lambda s: s.startswith("The")) is None


def test_per_sentence_runs_once_and_gives_each_text_its_outputs():
    texts = ["One. Two.", "Three."]
    cuts = [split_sentences(texts[0]), None]
    calls = []

    def run(flat):
        calls.append(flat)
        return [s.upper() for s in flat]

    out = per_sentence(texts, cuts, run, lambda text, parts, cut: cut.join(parts))
    assert out == ["ONE. TWO.", "THREE."] and calls == [["One.", "Two.", "Three."]]
