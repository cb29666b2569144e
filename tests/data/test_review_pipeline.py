"""TextPipeline: what the model sees of a review, in bounded memory, and where it is in the text."""

from __future__ import annotations

import pytest
import torch

from attnkit.data import review_pipeline
from attnkit.data.classification_text import CharTokenizer, WordTokenizer, build_vocab
from attnkit.data.imdb import Review
from attnkit.data.review_pipeline import TextPipeline, collate, text_chunks


def _pipeline(maxlen=4, truncating="pre", padding="pre", tokenizer=None):
    tok = tokenizer or WordTokenizer()
    vocab = build_vocab([tok.tokenize("good film bad plot good")], num_words=10)
    return TextPipeline(tok, vocab, maxlen, padding, truncating)


def test_read_counts_cut_and_unknown_tokens():
    pipe = _pipeline(maxlen=4)
    seen = pipe.read("Good film, bad acting and a bad plot")   # 8 tokens
    assert seen.tokens == ["and", "a", "bad", "plot"]         # the last 4 ("pre")
    assert seen.dropped == 4 and seen.unknown == 2 and seen.unknown_share == 0.5
    first = _pipeline(maxlen=4, truncating="post").read("Good film, bad acting and a bad plot")
    assert first.tokens == ["good", "film", "bad", "acting"] and first.dropped == 4
    short = pipe.read("good film")
    assert short.dropped == 0 and short.unknown == 0 and len(short.ids) == 2
    assert pipe.read("!!!").tokens == [] and pipe.read("!!!").unknown_share == 0.0


def test_encode_pads_on_the_padding_side():
    ids, lengths = _pipeline(maxlen=4).encode(["good film", "bad plot good film bad"])
    assert ids.shape == (2, 4) and lengths.tolist() == [2, 4]
    assert ids[0, :2].tolist() == [0, 0] and ids[0, 2:].tolist() != [0, 0]
    post, _ = _pipeline(maxlen=4, padding="post").encode(["good film"])
    assert post[0, 2:].tolist() == [0, 0]


def test_dataset_and_collate():
    data = _pipeline().dataset([Review("good film", 1), Review("bad plot", 0)])
    ids, lengths, labels = collate([data[0], data[1]])
    assert ids.shape == (2, 4) and labels.tolist() == [1.0, 0.0]
    assert labels.dtype == torch.float32 and lengths.tolist() == [2, 2]


@pytest.mark.parametrize("tokenizer", [WordTokenizer(), CharTokenizer()])
def test_long_texts_are_read_in_chunks_with_the_same_tokens(monkeypatch, tokenizer):
    text = " ".join(f"Word{i % 7},<br />next{i}" for i in range(300))
    whole = tokenizer.tokenize(text)
    monkeypatch.setattr(review_pipeline, "CHUNK_CHARS", 64)
    pieces = list(text_chunks(text, 64))
    assert len(pieces) > 10 and "".join(pieces) == text
    assert [t for p in pieces for t in tokenizer.tokenize(p)] == whole
    seen = _pipeline(maxlen=5, tokenizer=tokenizer).read(text)
    assert seen.tokens == whole[-5:] and seen.dropped == len(whole) - 5


