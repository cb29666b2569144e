"""Where a translation run's pairs come from: specs, the 96/2/2 split, skipped-line notes."""

import gzip

import pytest

from attnkit.data.translation_splits import (
    data_spec,
    eval_pairs,
    eval_sources,
    load_splits,
    read_pair_file,
    spec_name,
    split_by_source,
)
from attnkit.errors import DataError


def _pairs(n):
    return [(f"s{i}", f"t{i}") for i in range(n)]


def test_split_keeps_alternatives_together_and_sizes_96_2_2():
    pairs = _pairs(200) + [("s5", "alt")]
    splits = split_by_source(pairs, seed=0)
    assert sum(len(v) for v in splits.values()) == 201
    where = {en: name for name, ps in splits.items() for en, _ in ps}
    assert [name for name, ps in splits.items() for en, _ in ps if en == "s5"] == \
        [where["s5"]] * 2
    sources = {name: {en for en, _ in ps} for name, ps in splits.items()}
    assert len(sources["valid"]) == len(sources["test"]) == 20      # a tenth of 200
    assert not sources["train"] & sources["test"] and not sources["valid"] & sources["test"]


@pytest.mark.parametrize("sources, held_out", [(200, 20), (300, 30), (2000, 100),
                                                (5000, 100), (100_000, 2000), (3, 1)])
def test_a_small_corpus_keeps_a_validation_set_that_means_something(sources, held_out):
    """2%, but at least 100 sources or a tenth of a small corpus (2% of 300 is 6)."""
    assert eval_sources(sources) == held_out
    if sources < 1000:
        splits = split_by_source(_pairs(sources), seed=0)
        assert len(splits["valid"]) == len(splits["test"]) == held_out


def test_split_follows_the_seed():
    pairs = _pairs(300)
    assert split_by_source(pairs, seed=3) == split_by_source(pairs, seed=3)
    assert split_by_source(pairs, seed=3)["test"] != split_by_source(pairs, seed=4)["test"]
    with pytest.raises(DataError, match="at least 3"):
        split_by_source(_pairs(2), seed=0)


def test_synthetic_splits_come_from_the_seed():
    a = load_splits(data_spec("synthetic", seed=1, train_size=50))
    b = load_splits(data_spec("synthetic", seed=1, train_size=50))
    c = load_splits(data_spec("synthetic", seed=2, train_size=50))
    assert len(a["train"]) == 50 and a == b and a["train"] != c["train"]


def test_specs_of_files_and_folders(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"s{i}\tt{i}\n" for i in range(100)), encoding="utf-8")
    spec = data_spec(str(path), seed=7)
    assert spec == {"kind": "file", "path": str(path.resolve()), "split_seed": 7}
    assert spec_name(spec) == str(path.resolve()) and spec_name(data_spec("tatoeba")) == "tatoeba"
    assert len(eval_pairs(str(path), {"kind": "synthetic"})) == 100   # a file: every pair
    with pytest.raises(DataError, match="no such file"):
        data_spec(str(tmp_path / "absent.tsv"))
    with pytest.raises(DataError, match="train, valid and test"):
        data_spec(str(tmp_path))
    for split in ("train", "valid", "test"):
        with gzip.open(tmp_path / f"{split}.tsv.gz", "wt", encoding="utf-8") as f:
            f.write(f"{split} one\t{split} un\n")
    splits = load_splits(data_spec(str(tmp_path)))
    assert splits["test"] == [("test one", "test un")]


def test_skipped_lines_are_reported_and_strict_refuses_them(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\nno tab here\nc\td\n", encoding="utf-8")
    notes = []
    assert read_pair_file(path, log=notes.append) == [("a", "b"), ("c", "d")]
    assert len(notes) == 1 and "dropped 1 line of" in notes[0]
    assert "1 without a tab (" in notes[0] and "pairs.tsv:2)" in notes[0]
    with pytest.raises(DataError, match=":2:"):
        read_pair_file(path, strict=True)
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="no sentence pairs"):
        read_pair_file(empty)
