"""Vocab: building, encode/decode, JSON round trip and validation."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from attnkit.data.vocab import DEFAULT_SPECIALS, Vocab
from attnkit.errors import DataError

SENTS = [["le", "chat", "dort"], ["le", "chien", "dort"], ["un", "chat"], ["le"]]


def test_build_order_and_specials():
    v = Vocab.build(SENTS)
    assert v.itos[:4] == list(DEFAULT_SPECIALS)
    assert (v.pad_id, v.bos_id, v.eos_id, v.unk_id) == (0, 1, 2, 3)
    # Independent ranking: frequency descending, then alphabetical.
    counts = Counter(t for s in SENTS for t in s)
    expected = sorted(counts, key=lambda t: (-counts[t], t))
    assert v.itos[4:] == expected == ["le", "chat", "dort", "chien", "un"]
    assert len(v) == 9


def test_build_is_order_independent_and_min_freq_max_size():
    assert Vocab.build(SENTS) == Vocab.build(list(reversed(SENTS)))
    v = Vocab.build(SENTS, min_freq=2)
    assert v.itos[4:] == ["le", "chat", "dort"]
    v = Vocab.build(SENTS, max_size=6)
    assert v.itos[4:] == ["le", "chat"] and len(v) == 6
    with pytest.raises(ValueError):
        Vocab.build(SENTS, max_size=2)
    with pytest.raises(ValueError):
        Vocab.build(SENTS, min_freq=0)


def test_encode_decode_unknown():
    v = Vocab.build(SENTS)
    ids = v.encode(["le", "loup", "dort"], add_bos=True, add_eos=True)
    assert ids == [1, v.stoi["le"], 3, v.stoi["dort"], 2]
    assert v.decode(ids) == ["le", "<unk>", "dort"]
    assert v.decode(ids, strip_specials=False) == ["<bos>", "le", "<unk>", "dort", "<eos>"]
    # Stops at the first <eos>, drops padding; accepts tensors.
    assert v.decode(torch.tensor([1, 4, 2, 5, 0])) == ["le"]
    with pytest.raises(ValueError, match="out of range"):
        v.decode([99])


def test_custom_specials_without_unk():
    v = Vocab.build(SENTS, specials=("<pad>", "<unk>"))
    assert v.itos[:2] == ["<pad>", "<unk>"] and v.unk_id == 1
    assert v.encode(["loup"]) == [1]
    with pytest.raises(ValueError, match="<bos>"):
        v.encode(["le"], add_bos=True)
    no_unk = Vocab(["<pad>", "a"], specials=("<pad>",))
    with pytest.raises(ValueError, match="unknown token"):
        no_unk.encode(["b"])


def test_json_round_trip(tmp_path):
    v = Vocab.build(SENTS + [["été", "garçon"]])
    path = tmp_path / "vocab.json"
    v.to_json(path)
    assert Vocab.from_json(path) == v
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # no temp file left


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "invalid JSON"),
        ('{"format": "other"}', "not an attnkit vocabulary"),
        ('{"format": "attnkit.vocab", "version": 9, "specials": [], "tokens": []}', "version"),
        ('{"format": "attnkit.vocab", "version": 1, "specials": ["<pad>"], '
         '"tokens": ["<pad>", "a", "a"]}', "duplicate"),
        ('{"format": "attnkit.vocab", "version": 1, "specials": ["<pad>", "<unk>"], '
         '"tokens": ["<pad>", "a"]}', "specials"),
        ('{"format": "attnkit.vocab", "version": 1, "specials": ["<pad>"], "tokens": [1]}',
         "list of strings"),
    ],
)
def test_from_json_malformed(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        Vocab.from_json(path)
    assert str(path) in str(info.value)


def test_from_json_missing(tmp_path):
    with pytest.raises(DataError, match="not found"):
        Vocab.from_json(tmp_path / "none.json")
