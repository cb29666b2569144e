"""Word alignments as data: Pharaoh lines, gold links and AER against hand-computed figures,
the symmetrisation heuristics on hand-worked examples, and links drawn from piece matrices."""

from __future__ import annotations

import numpy as np
import pytest

from attnkit.alignment.links import (
    Gold,
    alignment_scores,
    extract,
    format_pharaoh,
    grow_diag_final_and,
    read_gold,
    read_pharaoh,
    symmetrize,
    word_scores,
)
from attnkit.errors import DataError


def test_pharaoh_round_trip(tmp_path):
    assert format_pharaoh({(2, 1), (0, 0), (0, 0)}) == "0-0 2-1"
    path = tmp_path / "a.wa"
    path.write_text("0-0 1-1\n\n2-0 2-1 3p4\n", encoding="utf-8")
    assert read_pharaoh(path) == [{(0, 0), (1, 1)}, set(), {(2, 0), (2, 1), (3, 4)}]
    path.write_text("0-0\n0-0 x-1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"a.wa:2: not a Pharaoh link"):
        read_pharaoh(path)


def test_aer_by_hand():
    # A = {00, 11, 10}; S = {00}; P = S + {11}: |A&S| = 1, |A&P| = 2.
    gold = [Gold(sure={(0, 0)}, possible={(0, 0), (1, 1)})]
    s = alignment_scores([{(0, 0), (1, 1), (1, 0)}], gold)
    assert s["precision"] == pytest.approx(200 / 3)
    assert s["recall"] == pytest.approx(100.0)
    assert s["aer"] == pytest.approx(100 * (1 - 3 / 4))
    # Summed over the corpus, not averaged per sentence: a second pair with A = {} and S = {22}.
    gold.append(Gold(sure={(2, 2)}, possible={(2, 2)}))
    s = alignment_scores([{(0, 0), (1, 1), (1, 0)}, set()], gold)
    assert s["aer"] == pytest.approx(100 * (1 - 3 / 5)) and s["recall"] == pytest.approx(50.0)
    assert alignment_scores([gold[0].sure], [gold[0]])["aer"] == 0.0


def test_gold_file_is_checked(tmp_path):
    path = tmp_path / "g.wa"
    path.write_text("1 1 1 S\n1 2 3 P\n2 1 1\n", encoding="utf-8")
    gold = read_gold(path, [2, 1], [3, 1])
    assert gold[0].sure == {(0, 0)} and gold[0].possible == {(0, 0), (1, 2)}
    assert gold[1].sure == {(0, 0)}          # a link without S/P is sure
    with pytest.raises(DataError, match=r"g.wa:2: sentence 1 has 2 French tokens; the link "
                                        r"names token 3"):
        read_gold(path, [2, 1], [2, 1])
    with pytest.raises(DataError, match="sentence 2 does not exist"):
        read_gold(path, [2], [3])
    path.write_text("1 1 x S\n", encoding="utf-8")
    with pytest.raises(DataError, match="not a gold link"):
        read_gold(path, [2], [3])


def test_grow_diag_final_and_by_hand():
    fwd = {(0, 0), (1, 1), (2, 1), (4, 4)}
    rev = {(0, 0), (1, 1), (2, 2), (3, 4)}
    # Intersection {00, 11}; grow: (2,1) and (2,2) neighbour (1,1) and link an unaligned
    # word each; (4,4) and (3,4) neighbour nothing aligned; final-and: (4,4) links two
    # unaligned words, then (3,4)'s target 4 is taken.
    assert grow_diag_final_and(fwd, rev) == {(0, 0), (1, 1), (2, 1), (2, 2), (4, 4)}
    assert symmetrize(fwd, rev, "intersection") == {(0, 0), (1, 1)}
    assert symmetrize(fwd, rev, "union") == fwd | rev
    assert symmetrize(fwd, None, "none") == fwd
    with pytest.raises(ValueError, match="reverse"):
        symmetrize(fwd, None, "intersection")


def test_word_scores_gather_pieces():
    # Target pieces: t0 = word 0, t1 t2 = word 1; source pieces: s0 s1 = word 0, s2 = word 1.
    pieces = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
    words = word_scores(pieces, [[0], [1], [1]], [[0], [0], [1]], 2, 2)
    np.testing.assert_allclose(words, [[0.8, 0.2], [0.4, 0.6]])   # rows: mean; columns: sum
    assert np.allclose(words.sum(1), 1)
    assert extract(words) == {(0, 0), (1, 1)}
    assert extract(words, extraction="threshold", threshold=0.3) == {(0, 0), (0, 1), (1, 1)}
    rev = np.array([[0.9, 0.45], [0.1, 0.55]])                     # columns: source words
    assert extract(words, rev, symmetrize="intersection") == {(0, 0), (1, 1)}
    with pytest.raises(ValueError, match="does not match"):
        word_scores(pieces, [[0]], [[0], [0], [1]], 2, 2)
