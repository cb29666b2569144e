"""Decoding for translation models with the step API: greedy (whole, or step by step with
`greedy_steps`), beam search, unk replacement, and `decode_many` (length-grouped
batches of any number of sentences)."""

from attnkit.decoding.batched import decode_many, length_batches, padded_sources
from attnkit.decoding.beam import beam_search, normalised_score
from attnkit.decoding.greedy import GreedyStep, greedy_decode, greedy_steps
from attnkit.decoding.hypothesis import Hypothesis, max_lengths, replace_unk

__all__ = ["GreedyStep", "Hypothesis", "beam_search", "decode_many", "greedy_decode",
           "greedy_steps", "length_batches", "max_lengths", "normalised_score", "padded_sources",
           "replace_unk"]
