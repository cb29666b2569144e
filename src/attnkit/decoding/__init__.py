"""Decoding for translation models with the step API: greedy, beam search, unk replacement,
and :func:`decode_many` (length-grouped batches of any number of sentences)."""

from attnkit.decoding.batched import decode_many, length_batches
from attnkit.decoding.beam import beam_search, normalised_score
from attnkit.decoding.greedy import greedy_decode
from attnkit.decoding.hypothesis import Hypothesis, max_lengths
from attnkit.decoding.unk import replace_unk

__all__ = ["Hypothesis", "beam_search", "decode_many", "greedy_decode", "length_batches",
           "max_lengths", "normalised_score", "replace_unk"]
