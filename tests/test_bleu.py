"""One sacrebleu wrapper: reference padding and hand-checkable scores."""

import pytest

from attnkit.bleu import bleu_chrf, reference_streams


def test_streams_pad_missing_references_with_none():
    assert reference_streams([["a", "b"], ["c"]]) == [["a", "c"], ["b", None]]


def test_identical_hypotheses_score_100_and_a_second_reference_can_only_help():
    same = bleu_chrf(["the cat sat on the mat"], [["the cat sat on the mat"]])["bleu"]
    assert same == pytest.approx(100.0)
    hyp = ["the cat is on the mat"]
    one = bleu_chrf(hyp, [["the cat sat on the mat"]])["bleu"]
    two = bleu_chrf(hyp, [["the cat sat on the mat", "the cat is on the mat"]])["bleu"]
    assert one < two == pytest.approx(100.0)


def test_uneven_reference_counts_do_not_repeat_a_reference():
    # Sentence 2 has one reference; padding it with None must score it as one-reference.
    mixed = bleu_chrf(["a b c d", "e f g h"], [["a b c d", "x y z w"], ["e f g x"]])
    alone = bleu_chrf(["e f g h"], [["e f g x"]])
    assert mixed["counts"]["totals"][0] == 8 and alone["counts"]["matches"][0] == 3
    assert mixed["counts"]["matches"][0] == 4 + 3


def test_bad_reference_lists_raise():
    with pytest.raises(ValueError, match="sentence 1 has no reference"):
        bleu_chrf(["a", "b"], [["a"], []])
    with pytest.raises(ValueError, match="2 hypotheses but 1"):
        bleu_chrf(["a", "b"], [["a"]])
