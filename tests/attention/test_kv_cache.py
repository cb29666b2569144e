"""The decoding state's storage: a buffer that grows in place, reorders rows, and keys/values."""

import pytest
import torch

from attnkit.attention.kv_cache import GrowingBuffer, KeyValueCache


def test_appends_are_written_in_place_until_full_then_the_buffer_doubles():
    buf = GrowingBuffer(torch.zeros(2, 3, dtype=torch.long), dim=1)
    first = buf.data.data_ptr()
    buf.append(torch.tensor([[1], [2]]))
    buf.append(torch.tensor([[3, 5], [4, 6]]))
    assert buf.data.data_ptr() == first and buf.length == 3
    buf.append(torch.tensor([[7], [8]]))
    assert buf.capacity == 6 and buf.length == 4
    assert buf.filled().tolist() == [[1, 3, 5, 7], [2, 4, 6, 8]]


def test_reorder_keeps_rows_with_repeats_and_copies_only_the_filled_part():
    buf = GrowingBuffer(torch.full((3, 4, 2), -1.0), dim=1)
    buf.append(torch.arange(12.0).view(3, 2, 2))
    buf.reorder(torch.tensor([2, 2, 0, 1]))
    assert buf.filled().shape == (4, 2, 2) and buf.capacity == 4
    assert buf.filled()[:, 0, 0].tolist() == [8.0, 8.0, 0.0, 4.0]
    buf.append(torch.zeros(4, 1, 2))
    assert buf.filled()[:, 2].eq(0).all() and buf.length == 3
    with pytest.raises(ValueError, match="rows are dimension 0"):
        GrowingBuffer(torch.zeros(2, 2), dim=0)


def test_key_value_cache_holds_time_on_dimension_two():
    cache = KeyValueCache.empty(rows=2, heads=3, head_dim=4, capacity=1, like=torch.zeros(1))
    k = torch.randn(2, 3, 2, 4)
    keys, values = cache.append(k, 2 * k)
    assert cache.length == 2 and keys.shape == (2, 3, 2, 4)
    torch.testing.assert_close(values, 2 * k)
    cache.reorder(torch.tensor([1]))
    torch.testing.assert_close(cache.keys.filled(), k[1:])
