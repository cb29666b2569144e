"""kept_by_length, TranslationDataset and collate_translation against hand-built tensors."""

from __future__ import annotations

import functools

import pytest
import torch

from attnkit.data.translation import TranslationDataset, collate_translation, kept_by_length
from attnkit.data.vocab import Vocab


def test_kept_by_length():
    pairs = [(["a"], ["b"]), (["a"] * 4, ["b"]), ([], ["b"]), (["a"], ["b"] * 3), (["a"], [])]
    kept, drops = kept_by_length(pairs, 3)
    assert kept == [0, 3] and drops.total == 3
    assert drops.count("longer than 3 tokens") == 1 and drops.count("with an empty side") == 2
    assert drops.format("the training pairs") == ("dropped 3 pairs of the training pairs:\n"
                                                   "  1 longer than 3 tokens\n"
                                                   "  2 with an empty side")
    assert kept_by_length(pairs[:1], 3)[1].format("x") == ""


def test_dataset_and_collate():
    src_v = Vocab.build([["the", "cat"], ["a", "dog"]])
    tgt_v = Vocab.build([["le", "chat"], ["un", "chien"]])
    ds = TranslationDataset.from_token_pairs(
        [(["the", "cat", "sleeps"], ["le", "chat"]), (["a", "dog"], ["un", "chien", "dort"])],
        src_v, tgt_v)
    assert len(ds) == 2 and ds.lengths() == [3, 4]
    s0, t0 = ds[0]
    assert s0 == [src_v.stoi["the"], src_v.stoi["cat"], src_v.unk_id]
    collate = functools.partial(collate_translation, pad_id=tgt_v.pad_id)
    b = collate([ds[0], ds[1]])
    le, chat, un, chien = (tgt_v.stoi[w] for w in ("le", "chat", "un", "chien"))
    unk = tgt_v.unk_id
    assert b["src"].tolist() == [s0, ds[1][0] + [0]]
    assert b["src_lengths"].tolist() == [3, 2]
    assert b["tgt_in"].tolist() == [[1, le, chat, 0], [1, un, chien, unk]]
    assert b["tgt_out"].tolist() == [[le, chat, 2, 0], [un, chien, unk, 2]]
    assert b["tgt_lengths"].tolist() == [3, 4]
    assert all(t.dtype == torch.long for t in b.values())


def test_collate_custom_pad_and_errors():
    b = collate_translation([([5], [6])], pad_id=9, bos_id=7, eos_id=8)
    assert b["tgt_in"].tolist() == [[7, 6]] and b["tgt_out"].tolist() == [[6, 8]]
    with pytest.raises(ValueError, match="empty source"):
        collate_translation([([], [1])], pad_id=0)
    with pytest.raises(ValueError, match="empty batch"):
        collate_translation([], pad_id=0)
    with pytest.raises(ValueError, match="same length"):
        TranslationDataset([[1]], [])
    with pytest.raises(ValueError, match="same length"):
        TranslationDataset([[1]], [[2]], links=[])


def test_links_become_rows_of_the_position_that_reads_each_target_piece():
    # Pair 0: target piece 0 <- source piece 1, piece 1 <- pieces 0 and 2; pair 1: no links.
    ds = TranslationDataset([[5, 6, 7], [5]], [[8, 9], [8, 9, 10]],
                            links=[[(0, 1), (1, 0), (1, 2)], []])
    assert ds[0] == ([5, 6, 7], [8, 9], [(0, 1), (1, 0), (1, 2)])
    b = collate_translation([ds[0], ds[1]], pad_id=0)
    assert b["align"].shape == (2, 4, 3)       # [B, T = 3 pieces + <bos>, S]
    assert b["align"][0].tolist() == [[0, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]]
    assert b["align"][1].sum() == 0
    assert "align" not in collate_translation([ds[0][:2]], pad_id=0)
