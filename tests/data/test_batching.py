"""Batch plans: pure function of (epoch, seed), full coverage, token cap, less padding."""

from __future__ import annotations

import random

import pytest

from attnkit.data.batching import bucket_batch_plan, padding_fraction


def _lengths(n=2000, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 60) for _ in range(n)]


def test_deterministic_and_covering():
    lengths = _lengths()
    plan = bucket_batch_plan(lengths, 32)
    a = plan(0, 0)
    assert a == plan(0, 0) == bucket_batch_plan(lengths, 32)(0, 0)
    assert a != plan(1, 0) and a != plan(0, 1)
    for epoch in range(3):
        flat = sorted(i for b in plan(epoch, 5) for i in b)
        assert flat == list(range(len(lengths)))
    assert all(1 <= len(b) <= 32 for b in a)


def test_max_tokens_and_long_example():
    lengths = _lengths(500) + [200]
    plan = bucket_batch_plan(lengths, 64, max_tokens=300)
    batches = plan(0, 0)
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) * longest <= 300 or len(b) == 1
    assert [500] in batches
    assert sorted(i for b in batches for i in b) == list(range(501))


def test_no_shuffle_is_sorted_and_fixed():
    lengths = _lengths(300)
    plan = bucket_batch_plan(lengths, 16, shuffle=False)
    assert plan(0, 0) == plan(3, 9)
    flat = [i for b in plan(0, 0) for i in b]
    assert [lengths[i] for i in flat] == sorted(lengths)


def test_less_padding_than_random_batches():
    lengths = _lengths(4000)
    bucketed = padding_fraction(bucket_batch_plan(lengths, 64)(0, 0), lengths)
    rng = random.Random(0)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    random_batches = [order[i:i + 64] for i in range(0, len(order), 64)]
    plain = padding_fraction(random_batches, lengths)
    assert bucketed < plain / 4, (bucketed, plain)


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        bucket_batch_plan([1, 2], 0)
    with pytest.raises(ValueError, match="num_examples"):
        bucket_batch_plan([[1, 2]], 2)
