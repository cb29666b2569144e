"""Batch plans: pure function of (epoch, seed), full coverage, token cap, less padding; length
groups: the cheapest split by their cost model."""

from __future__ import annotations

import random

import pytest
import torch

from attnkit.data import batching
from attnkit.data.batching import bucket_batch_plan, plan_length_groups


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


def padding_fraction(batches, lengths) -> float:
    """Share of padded positions: ``1 - real tokens / (sum over batches of size * longest)``."""
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches if b)
    return 1.0 - sum(lengths[i] for b in batches for i in b) / padded


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


def _split_cost(lengths, sizes):
    bounds = [0, *torch.tensor(sizes).cumsum(0).tolist()]
    total = 0.0
    for i, j in zip(bounds, bounds[1:], strict=False):
        keep = max(lengths[j - 1], 1)
        total += (j - i) * keep * (1 + keep * batching.GROUP_PAIR_COST) + batching.GROUP_COST
    return total


def _cheapest_split(lengths, max_groups, min_rows):
    """By trying every set of cuts at multiples of min_rows."""
    import itertools

    n = len(lengths)
    points = range(min_rows, n - min_rows + 1, min_rows)
    splits = ([b - a for a, b in zip((0, *cuts), (*cuts, n), strict=True)]
              for k in range(max_groups) for cuts in itertools.combinations(points, k))
    return min(_split_cost(lengths, sizes) for sizes in splits)


@pytest.mark.parametrize("seed", range(8))
def test_length_groups_are_the_cheapest_split(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 70, (1,), generator=g))
    high = [24, 100, 800][seed % 3]
    lengths = sorted(torch.randint(0, high + 1, (n,), generator=g).tolist())
    sizes = plan_length_groups(lengths, max_groups=4, min_rows=8)
    assert sum(sizes) == n and 1 <= len(sizes) <= 4
    if n < 16:
        assert sizes == [n]
    else:
        assert min(sizes) >= 8
        assert _split_cost(lengths, sizes) == pytest.approx(_cheapest_split(lengths, 4, 8))


def test_length_groups_of_imdb_like_batches():
    # 88% of IMDB reviews fill maxlen 100: the full ones stay one group.
    assert plan_length_groups([100] * 64) == [64]
    assert plan_length_groups([30] * 24 + [100] * 40) == [24, 40]
    assert plan_length_groups([]) == [] and plan_length_groups([5, 7]) == [2]
