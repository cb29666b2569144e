"""Decoding for translation models with the step API: greedy, beam search, unk replacement."""

from attnkit.decoding.beam import beam_search, normalised_score
from attnkit.decoding.greedy import greedy_decode
from attnkit.decoding.hypothesis import Hypothesis, max_lengths
from attnkit.decoding.unk import replace_unk

__all__ = ["Hypothesis", "beam_search", "greedy_decode", "max_lengths", "normalised_score",
           "replace_unk"]
