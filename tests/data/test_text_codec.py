"""The translation text codec: words or subwords, and reading at most N tokens of a huge text."""

import time

import pytest

from attnkit.data.subword import SubwordModel
from attnkit.data.text import tokenize
from attnkit.data.text_codec import CHUNK_CHARS, TextCodec, text_chunks, word_count


def test_chunks_cut_at_spaces_and_join_back():
    text = " ".join(f"w{i}" for i in range(5000))
    chunks = list(text_chunks(text, size=100))
    assert "".join(chunks) == text
    assert all(len(c) <= 100 for c in chunks)
    assert all(c.startswith(" ") for c in chunks[1:])      # every cut is at a space


def test_encode_capped_matches_the_whole_encoding():
    codec = TextCodec()
    short = "I'm cold, aren't you ?"
    assert codec.encode_capped(short, "en", 3) == (tokenize(short, "en")[:3], 5)   # of 8
    assert codec.encode_capped(short, "en", 100) == (tokenize(short, "en"), 0)
    long = " ".join(["Don't", "stop", "now", "."] * (CHUNK_CHARS // 8))   # > one chunk
    whole = tokenize(long, "en")
    assert codec.encode_capped(long, "en", 50) == (whole[:50], len(whole) - 50)
    assert word_count(long, "en") == len(whole)


def test_a_huge_line_is_capped_quickly():
    text = " ".join(["word"] * 100_000)
    start = time.perf_counter()
    tokens, cut = TextCodec().encode_capped(text, "en", 512)
    assert len(tokens) == 512 and cut == 100_000 - 512
    assert time.perf_counter() - start < 10      # chunked: ~0.1 s on a quiet CPU


def test_subword_chunks_give_the_pieces_of_the_whole(tmp_path):
    pytest.importorskip("sentencepiece")
    texts = ["the cat sleeps here .", "le chat dort ici .", "a small dog runs ."] * 50
    model = SubwordModel.train(texts, tmp_path / "sp.model", vocab_size=40)
    codec = TextCodec(model)
    long = " ".join(["the small cat runs here ."] * (CHUNK_CHARS // 20))
    whole = codec.encode(long, "en")
    assert codec.encode_capped(long, "en", 30) == (whole[:30], len(whole) - 30)
    assert codec.decode(codec.encode("le chat dort .", "fr"), "fr") == "le chat dort ."
