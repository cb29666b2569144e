"""The synthetic En->Fr corpus: determinism, split disjointness, hand-checked grammar."""

from __future__ import annotations

import random

from attnkit.data import synthetic_fr as syn
from attnkit.data.text import detokenize, tokenize


def test_deterministic_and_distinct():
    a = syn.generate_pairs(500, seed=3)
    assert a == syn.generate_pairs(500, seed=3)
    assert a != syn.generate_pairs(500, seed=4)
    assert len({en for en, _ in a}) == 500


def test_splits_disjoint():
    s = syn.synthetic_splits(1, train=800, valid=100, test=100)
    sizes = {k: len(v) for k, v in s.items()}
    assert sizes == {"train": 800, "valid": 100, "test": 100}
    sources = [{en for en, _ in s[k]} for k in ("train", "valid", "test")]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])


def test_translation_is_a_function_and_lengths():
    rng = random.Random(7)
    seen: dict[str, str] = {}
    for _ in range(5000):
        en, fr = syn._sentence(rng)
        assert seen.setdefault(en, fr) == fr, (en, fr, seen[en])
        for text, lang in ((en, "en"), (fr, "fr")):
            toks = tokenize(text, lang)
            assert 3 <= len(toks) <= 12
            assert detokenize(toks, lang) == text


def test_small_vocabulary():
    pairs = syn.generate_pairs(5000, seed=0)
    en = {t for e, _ in pairs for t in tokenize(e, "en")}
    fr = {t for _, f in pairs for t in tokenize(f, "fr")}
    assert 60 <= len(en) <= 200 and 100 <= len(fr) <= 250


def test_hand_checked_sentences():
    # Independent surface rules, written out by hand from a French grammar.
    fs = syn._french_surface
    assert fs(["je", "ne", "la", "ai", "pas", "vue"]) == "Je ne l'ai pas vue."
    assert fs(["je", "aime", "ce", "arbre"]) == "J'aime cet arbre."
    assert fs(["ma", "école", "est", "petite"]) == "Mon école est petite."
    assert fs(["ma", "petite", "école"]) == "Ma petite école."
    assert fs(["le", "homme", "ne", "mange", "pas", "de", "orange"]) == (
        "L'homme ne mange pas d'orange.")
    assert syn._english_surface(["I", "eat", "a", "apple"]) == "I eat an apple."
    # Generated sentences obey agreement / placement / negation on a sample.
    pairs = dict(syn.generate_pairs(20000, seed=0))
    expected = {
        "The friend did not buy the blue oranges.": "L'ami n'a pas acheté les oranges bleues.",
        "My tired sister will be happy.": "Ma sœur fatiguée sera heureuse.",
        "Some boys found her.": "Des garçons l'ont trouvée.",
        "These tired girls were small.": "Ces filles fatiguées étaient petites.",
    }
    for en, fr in expected.items():
        assert pairs[en] == fr


def test_grammar_rules_on_sample():
    for en, fr in syn.generate_pairs(3000, seed=11):
        e, f = tokenize(en, "en", lowercase=True), tokenize(fr, "fr", lowercase=True)
        negated = "not" in e
        assert negated == ("pas" in f)
        if negated:
            assert ("ne" in f) or ("n'" in f)
            after = f[f.index("pas"):]  # indefinite objects after a negation become "de"
            assert not ({"des", "un", "une"} & set(after)), fr
        for i, tok in enumerate(f[:-1]):  # elision before a vowel always happens
            if tok in ("le", "la", "je", "ne", "de", "ce", "ma"):
                assert not syn._starts_with_vowel(f[i + 1]), fr
        if e[-2] == "her" and ("l'" in f) and any(t in f for t in ("ai", "a", "ont", "avons",
                                                                      "avez")):
            assert f[-2].endswith("e"), fr  # participle agrees with the preceding "la"
