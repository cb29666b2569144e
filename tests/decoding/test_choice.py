"""`top_k` finds exactly torch.topk's values by chunk maxima; `best_tokens` gives the
log-probabilities of the tokens it keeps."""

import pytest
import torch

from attnkit.decoding.choice import CHUNK, FEW_ROWS, best_tokens, top_k

# Widths: three chunks (the shortcut for k = 1 and 2, torch.topk itself for k = 10), whole
# chunks only, chunks and a tail, and the Tatoeba recipe's vocabulary.
WIDTHS = [CHUNK * 3, CHUNK * 40, CHUNK * 40 + 7, 8002]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("k", [1, 2, 10])
def test_values_are_exactly_torch_topk(width, k):
    scores = torch.randn(37, width, generator=torch.Generator().manual_seed(width + k)) * 4
    values, positions = top_k(scores, k)
    assert torch.equal(values, scores.topk(k, dim=-1).values)
    assert torch.equal(scores.gather(1, positions), values)
    assert all(len(set(row)) == k for row in positions.tolist())


@pytest.mark.parametrize("width", WIDTHS)
def test_ties_give_the_same_values_and_k1_the_first_maximum(width):
    # Five distinct values over thousands of positions: every row is full of ties.
    scores = torch.randint(0, 5, (23, width), generator=torch.Generator().manual_seed(3)).float()
    for k in (1, 2, 10):
        values, positions = top_k(scores, k)
        assert torch.equal(values, scores.topk(k, dim=-1).values)
        assert torch.equal(scores.gather(1, positions), values)
    assert torch.equal(top_k(scores, 1)[1][:, 0], scores.argmax(dim=-1))


def test_the_best_in_the_tail_or_in_one_chunk_is_found():
    width = CHUNK * 40 + 7
    scores = torch.zeros(FEW_ROWS, width)              # enough rows for the chunked search
    scores[0, width - 1] = 5.0                         # the maximum after the last whole chunk
    scores[1, 10], scores[1, width - 1] = 5.0, 5.0     # equal: the first one, as argmax
    scores[2, CHUNK * 7: CHUNK * 7 + 10] = torch.arange(1.0, 11.0)   # all ten in one chunk
    _, positions = top_k(scores, 1)
    assert positions[:3, 0].tolist() == [width - 1, 10, CHUNK * 7 + 9]
    values, positions = top_k(scores, 10)
    assert values[2].tolist() == list(range(10, 0, -1))
    assert positions[2].tolist() == [CHUNK * 7 + i for i in range(9, -1, -1)]


def test_masked_scores_are_never_preferred():
    scores = torch.full((FEW_ROWS, CHUNK * 20), float("-inf"))
    scores[:, [5, 700, 1000]] = torch.tensor([1.0, 3.0, 2.0])
    scores[1] = float("-inf")
    scores[1, 1279] = 0.0
    values, positions = top_k(scores, 3)
    assert positions[0].tolist() == [700, 1000, 5]
    assert positions[1, 0].item() == 1279 and values[1, 1:].tolist() == [float("-inf")] * 2


@pytest.mark.parametrize("rows", [1, FEW_ROWS - 1, FEW_ROWS])
def test_few_rows_and_many_find_the_same(rows):
    scores = torch.randn(rows, 8002, generator=torch.Generator().manual_seed(rows))
    values, positions = top_k(scores, 10)
    assert torch.equal(values, scores.topk(10, dim=-1).values)
    assert torch.equal(scores.gather(1, positions), values)


@pytest.mark.parametrize("k", [0, CHUNK * 3 + 1])
def test_k_outside_the_row_is_refused(k):
    with pytest.raises(ValueError, match="k must be between 1 and the 192 scores"):
        top_k(torch.zeros(2, CHUNK * 3), k)


@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("rows", [FEW_ROWS - 1, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_best_tokens_are_log_softmax_topk(dtype, rows, offset):
    # offset: large logits (log_softmax is shift-invariant) must lose no digits.
    logits = (torch.randn(rows, 8002, generator=torch.Generator().manual_seed(1)) * 5
              + offset).to(dtype)
    log_probs, tokens = best_tokens(logits, 10)
    expected = torch.log_softmax(logits.float(), dim=-1).topk(10, dim=-1)
    assert log_probs.dtype == torch.float32
    # bf16 logits tie often: the tokens are then the same values, not always the same ids.
    assert torch.equal(logits.gather(1, tokens), logits.gather(1, expected.indices))
    # The same value by two formulas in one run: they differ by rounding only, a few float32
    # ulps of the normaliser (about 10 here, the logits shifted off), whichever vector kernels
    # the CPU takes for exp and the sums (AVX2, AVX512; AMX does no elementwise work).
    torch.testing.assert_close(log_probs, expected.values, rtol=0, atol=1e-5)
