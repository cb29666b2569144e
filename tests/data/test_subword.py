"""Subword model training/round trip on a small synthetic corpus (skips without sentencepiece),
and pieces joined into the words they spell."""

from __future__ import annotations

import pytest

from attnkit.data.subword import SubwordModel, join_pieces
from attnkit.data.synthetic_fr import generate_pairs
from attnkit.data.vocab import Vocab
from attnkit.errors import DataError


@pytest.fixture
def spm():
    return pytest.importorskip("sentencepiece")


@pytest.mark.parametrize(("pieces", "words", "owner"), [
    (["\u2581L", "'", "homme", "\u2581arrive", "."], ["L'homme", "arrive."],
     [[0], [0], [0], [1], [1]]),
    (["\u2581", "É", "té", "\u2581", "."], ["Été", "."], [[0], [0], [0], [1], [1]]),
    (["ab", "\u2581c", "\u2581"], ["ab", "c"], [[0], [1], [1]]),   # a stray mark at the end
    ([], [], []),
])
def test_pieces_join_into_the_words_they_spell(pieces, words, owner):
    assert join_pieces(pieces) == (words, owner)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_train_round_trip(tmp_path, model_type, spm):
    pairs = generate_pairs(400, seed=0)
    texts = [en for en, _ in pairs] + [fr for _, fr in pairs]
    path = tmp_path / "joint.model"
    sp = SubwordModel.train(texts, path, vocab_size=150, model_type=model_type)
    assert path.is_file() and [p.name for p in tmp_path.iterdir()] == ["joint.model"]
    assert 50 <= len(sp) <= 150
    again = SubwordModel(path)
    for text in texts[:50] + texts[-50:]:
        pieces = again.encode(text)
        assert again.decode(pieces) == text
    vocab = Vocab.build(sp.encode(t) for t in texts)
    assert vocab.unk_id == 3


def test_errors(tmp_path, spm):
    with pytest.raises(DataError, match="not found"):
        SubwordModel(tmp_path / "none.model")
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a model")
    with pytest.raises(DataError):
        SubwordModel(bad)
    with pytest.raises(ValueError, match="model_type"):
        SubwordModel.train(["a"], tmp_path / "x.model", model_type="word")
