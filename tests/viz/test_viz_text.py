import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.viz import normalize_scores, shade_text_ansi, shade_text_html
from attnkit.viz.palettes import SIGNED, WEIGHTS, colors_for

TRUE_BG = re.compile(r"\x1b\[48;2;(\d+);(\d+);(\d+);\d+m")
GREY_BG = re.compile(r"\x1b\[48;5;(\d+);\d+m")
HTML_RGB = re.compile(r"background-color: rgb\((\d+),(\d+),(\d+)\)")


def _luma(rgb):
    r, g, b = (int(x) for x in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


scores_st = st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=12)


@settings(max_examples=50, deadline=None)
@given(scores_st)
def test_ansi_truecolor_darker_means_more(scores):
    tokens = [f"t{i}" for i in range(len(scores))]
    out = shade_text_ansi(tokens, scores)
    lumas = [_luma(m) for m in TRUE_BG.findall(out)]
    assert len(lumas) == len(scores)
    order = np.argsort(scores, kind="stable")
    assert all(lumas[order[i]] >= lumas[order[i + 1]] - 1e-9 for i in range(len(order) - 1))
    assert out.count("\x1b[0m") == len(scores)  # every token resets


@settings(max_examples=50, deadline=None)
@given(scores_st)
def test_html_colour_is_the_palette_colour_of_the_score(scores):
    # The shared palette replaced a single colour with alpha = score; the colour of each span is
    # now the WEIGHTS palette entry of its normalised score.
    tokens = [f"t{i}" for i in range(len(scores))]
    rgbs = np.array(HTML_RGB.findall(shade_text_html(tokens, scores)), dtype=int)
    s = np.asarray(scores)
    expected = s / s.max() if s.max() > 0 else s
    np.testing.assert_array_equal(rgbs, colors_for(expected, WEIGHTS))


def test_ansi_256_colour_ramp_is_monotone():
    out = shade_text_ansi(["a", "b", "c"], [0.0, 0.5, 1.0], truecolor=False)
    codes = [int(c) for c in GREY_BG.findall(out)]
    assert codes == sorted(codes, reverse=True) and codes[0] == 255 and codes[-1] == 232


def test_plain_fallback_has_no_escape_codes():
    out = shade_text_ansi(["the", "duck"], torch.tensor([0.25, 0.5]), color=False)
    assert "\x1b" not in out and out == "the(0.50) duck(1.00)"


def test_html_escapes_tokens_and_titles_raw_value():
    out = shade_text_html(["<script>", 'a"b', "&"], [0.1, 0.2, 0.4])
    assert "<script>" not in out and "&lt;script&gt;" in out and "&quot;" in out
    assert "&amp;" in out
    assert 'title="0.4000"' in out and 'title="0.1000"' in out


def test_zero_and_negative_scores_do_not_divide_by_zero():
    np.testing.assert_array_equal(normalize_scores(["a", "b"], [0.0, 0.0]), [0.0, 0.0])
    np.testing.assert_array_equal(normalize_scores(["a", "b"], [-1.0, 2.0]), [0.0, 1.0])


def test_length_mismatch_and_nan():
    with pytest.raises(ValueError, match=r"len\(tokens\)=3"):
        shade_text_ansi(["a", "b", "c"], [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        shade_text_html(["a"], [float("nan")])


def test_signed_scores_use_the_diverging_palette():
    out = shade_text_html(["bad", "film", "great"], [-2.0, 0.0, 1.0], signed=True)
    rgbs = np.array(HTML_RGB.findall(out), dtype=int)
    np.testing.assert_array_equal(rgbs, colors_for([0.0, 0.5, 0.75], SIGNED))
    assert rgbs[0][0] > rgbs[0][2] and rgbs[2][2] > rgbs[2][0]  # red negative, blue positive
    assert shade_text_ansi(["bad", "great"], [-1.0, 0.5], signed=True, color=False) == (
        "bad(-1.00) great(+0.50)")
    grey = shade_text_ansi(["bad", "meh", "great"], [-1.0, 0.0, 1.0], signed=True,
                           truecolor=False)
    assert GREY_BG.findall(grey) == ["160", "252", "33"]
