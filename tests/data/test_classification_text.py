"""Tokenizers, the top-num_words vocabulary and Keras-style padding, on hand-worked examples."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.classification_text import (
    CharTokenizer,
    WordTokenizer,
    build_vocab,
    clean_text,
    make_tokenizer,
    pad_sequences,
    tokenizer_from_json,
)


def test_word_tokenizer_like_keras():
    tok = WordTokenizer()
    assert clean_text("A<br />B<BR>c") == "a b c"
    assert tok.tokenize("Great<br /><br />film, isn't it?! 10/10 (really)") == [
        "great", "film", "isn't", "it", "10", "10", "really"]
    assert tok.tokenize("   ") == []


def test_char_tokenizer_reads_chinese():
    tok = CharTokenizer()
    assert tok.tokenize("这部电影 很好看！") == ["这", "部", "电", "影", "很", "好", "看", "！"]
    texts = ["这部电影很好看", "这部电影很难看", "好看好看"]
    vocab = build_vocab((tok.tokenize(t) for t in texts), num_words=6)
    # counts: 看 4, 好 3, 这/部/电/影/很 2 each, 难 1 -> keep <pad> <unk> 看 好 + 2 ties by string
    assert vocab.itos[:4] == ["<pad>", "<unk>", "看", "好"]
    assert len(vocab) == 6
    assert vocab.encode(tok.tokenize("难看")) == [1, 2]


def test_vocab_top_num_words_by_frequency():
    docs = [["b", "a", "a"], ["c", "a", "b"], ["d"]]
    vocab = build_vocab(docs, num_words=4)  # a:3, b:2, then c/d (1 each) cut
    assert vocab.itos == ["<pad>", "<unk>", "a", "b"]
    assert vocab.encode(["a", "c", "b"]) == [2, 1, 3]
    with pytest.raises(ValueError):
        build_vocab(docs, num_words=1)


def test_pad_sequences_keras_defaults_pre_pre():
    ids, lengths = pad_sequences([[1, 2, 3, 4, 5], [6, 7], []], maxlen=3)
    assert ids.tolist() == [[3, 4, 5], [0, 6, 7], [0, 0, 0]]  # truncate start, pad start
    assert lengths.tolist() == [3, 2, 0]
    assert ids.dtype == torch.long


@pytest.mark.parametrize("padding,truncating,expected", [
    ("post", "post", [[1, 2, 3], [6, 7, 0]]),
    ("pre", "post", [[1, 2, 3], [0, 6, 7]]),
    ("post", "pre", [[3, 4, 5], [6, 7, 0]]),
])
def test_pad_sequences_modes(padding, truncating, expected):
    ids, lengths = pad_sequences([[1, 2, 3, 4, 5], [6, 7]], 3, padding=padding,
                                 truncating=truncating)
    assert ids.tolist() == expected
    assert lengths.tolist() == [3, 2]


def test_pad_sequences_bad_arguments():
    with pytest.raises(ValueError, match="padding"):
        pad_sequences([[1]], 3, padding="middle")
    with pytest.raises(ValueError, match="maxlen"):
        pad_sequences([[1]], 0)


def test_subword_tokenizer_round_trip(tmp_path):
    pytest.importorskip("sentencepiece")
    texts = [f"the movie was {w} and the actors were {v}" for w in
             ("great", "awful", "boring", "wonderful", "terrible", "brilliant")
             for v in ("superb", "wooden", "fine", "dreadful")] * 5
    tok = make_tokenizer("subword", texts, tmp_path, subword_vocab_size=60)
    pieces = tok.tokenize("The movie was GREAT<br />")
    assert "".join(pieces).replace("\u2581", " ").strip() == "the movie was great"
    again = tokenizer_from_json(tok.to_json(), tmp_path)
    assert again.tokenize("the actors were fine") == tok.tokenize("the actors were fine")
