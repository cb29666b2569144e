"""The text conventions of word alignment: the model's text for gold-standard tokens, the gold
standard's tokens for raw text, each with spans that keep token indices; pieces traced back."""

from __future__ import annotations

import pytest

from attnkit.alignment.text import aligner_tokens, pieces_to_tokens, surface


def _words(text, spans):
    return [text[a:b] for a, b in spans]


def test_french_gold_tokens_become_the_models_text():
    tokens = "je ai vu le homme de le village et de les autres à le marché .".split()
    text, spans = surface(tokens, "fr")
    assert text == "J'ai vu l'homme du village et des autres au marché."
    assert _words(text, spans) == ["J'", "ai", "vu", "l'", "homme", "du", "du", "village",
                                   "et", "des", "des", "autres", "au", "au", "marché", "."]
    text, _ = surface("il ne y avait de le avis , aujourd' hui , que il faut le faire de le "
                      "faire".split(), "fr")
    assert text == "Il n'y avait de l'avis, aujourd'hui, qu'il faut le faire de le faire"
    assert surface("lui - même".split(), "fr")[0] == "Lui-même"


def test_english_gold_tokens_become_the_models_text():
    text, spans = surface("i do n't know ( M. Mulroney ) , it 's bill C - 49 .".split(), "en")
    assert text == "I don't know (M. Mulroney), it's bill C-49."
    assert _words(text, spans)[:3] == ["I", "do", "n't"]


def test_ordinary_text_comes_back_as_it_was():
    for line, lang in (("The cat sat on the mat.", "en"), ("L'homme arrive à l'heure.", "fr")):
        assert surface(line.split(), lang)[0] == line


def test_aligner_tokens_write_raw_text_as_the_gold_standard_does():
    got = aligner_tokens("Je l'ai vu au marché, aujourd'hui.", "fr")
    assert [w for w, _ in got] == ["je", "le", "ai", "vu", "à", "le", "marché", ",",
                                   "aujourd'", "hui", "."]
    assert got[4][1] == got[5][1] == (11, 13)                  # both halves of "au"
    assert [w for w, _ in aligner_tokens("It's Tom's. I don't know lui-même", "en")] == [
        "it", "'s", "tom", "'s", ".", "i", "do", "n't", "know", "lui", "-", "même"]


@pytest.mark.parametrize("pieces, owners", [
    ([(0, 2), (2, 4), (5, 8)], [[0], [0, 1], [2]]),     # a piece across two tokens
    ([(4, 4), (5, 8)], [[2], [2]]),                       # an empty piece: the token after it
])
def test_pieces_to_tokens(pieces, owners):
    assert pieces_to_tokens(pieces, [(0, 3), (3, 4), (5, 8)]) == owners
