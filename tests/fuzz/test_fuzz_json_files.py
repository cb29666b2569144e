"""Fuzzing the JSON metadata readers: ``Vocab.from_json`` (DataError only) and ``TrainConfig``
(``from_json`` / ``from_dict``: ValueError only, as documented; DataError is a ValueError).

The xfail(strict) tests are crashes found here; each reason gives the fix. Remove the marker
once fixed (strict: the test then fails until you do)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnkit.data.caption_files import read_coco_captions
from attnkit.data.imdb import load_split
from attnkit.data.vocab import Vocab
from attnkit.errors import AttnkitError
from attnkit.training.config import TrainConfig

_spec = importlib.util.spec_from_file_location("fuzzlib", Path(__file__).with_name("fuzzlib.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

_TRAIN_FIELDS = sorted(TrainConfig().to_dict())


# ---------------------------------------------------------------- vocabulary
good_vocab = st.lists(st.text(max_size=5), max_size=6, unique=True).map(
    lambda toks: json.dumps({"format": "attnkit.vocab", "version": 1,
                             "specials": ["<pad>", "<unk>"],
                             "tokens": ["<pad>", "<unk>"] + [t for t in toks
                                                             if t not in ("<pad>", "<unk>")]
                             }).encode()
)


def _vocab_or_data_error(data: bytes) -> None:
    with fuzz.temp_file(data, "vocab.json") as path:
        try:
            vocab = Vocab.from_json(path)
        except AttnkitError:
            return
    assert vocab.itos[: len(vocab.specials)] == list(vocab.specials)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_vocab, gzip_too=False))
def test_vocab_arbitrary_bytes_raise_only_data_error(data):
    _vocab_or_data_error(data)


@settings(fuzz.SETTINGS)
@given(st.fixed_dictionaries({"format": st.just("attnkit.vocab") | fuzz.json_values,
                              "version": st.just(1) | fuzz.json_values,
                              "specials": st.just(["<pad>"]) | fuzz.json_values,
                              "tokens": fuzz.json_values}) | fuzz.json_values)
def test_vocab_any_json_values_raise_only_data_error(payload):
    _vocab_or_data_error(json.dumps(payload).encode())


def test_vocab_round_trip_survives_fuzzed_tokens(tmp_path):
    # The writer side: any tokens (quotes, newlines, non-BMP) come back identical.
    tokens = ["<pad>", "<bos>", "<eos>", "<unk>", 'a"b', "line\nbreak", "\U0001f600", "", " "]
    Vocab(tokens).to_json(tmp_path / "v.json")
    assert Vocab.from_json(tmp_path / "v.json").itos == tokens


# ---------------------------------------------------------------- run configuration
@settings(fuzz.SETTINGS)
@given(st.binary(max_size=256) | st.text(max_size=64) | good_vocab)
def test_train_config_arbitrary_text_raises_only_value_error(data):
    try:
        cfg = TrainConfig.from_json(data)
    except ValueError:
        return
    assert TrainConfig.from_json(cfg.to_json()) == cfg


@settings(fuzz.SETTINGS)
@given(st.dictionaries(st.sampled_from(_TRAIN_FIELDS), fuzz.json_values, max_size=4)
       | fuzz.json_values)
@example({"warmup_steps": "a"})
def test_train_config_any_json_values_raise_only_value_error(payload):
    try:
        TrainConfig.from_json(json.dumps(payload))
    except ValueError:
        return


# ---------------------------------------------------------------- deep nesting
DEEP = b"[" * 100_000  # json.loads recurses per level: RecursionError, not JSONDecodeError


@pytest.mark.parametrize("read", [
    pytest.param(lambda p: Vocab.from_json(p), id="vocab"),
    pytest.param(lambda p: read_coco_captions(p, p.parent, strict=False), id="coco"),
    pytest.param(lambda p: load_split(p, "train"), id="imdb-jsonl"),
    pytest.param(lambda p: TrainConfig.from_json(p.read_text()), id="train-config"),
])
def test_deeply_nested_json_raises_only_project_errors(read, tmp_path):
    path = tmp_path / "deep.json"
    path.write_bytes(DEEP)
    with pytest.raises(ValueError):  # DataError, or TrainConfig's documented ValueError
        read(path)
