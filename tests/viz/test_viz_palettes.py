import numpy as np
import pytest

from attnkit.viz.palettes import (
    LEVELS,
    SIGNED,
    WEIGHTS,
    WEIGHTS_ON_IMAGE,
    colors_for,
    lut,
    lut_hex,
    signed_to_unit,
    text_color,
)


def _luma(rgb):
    rgb = np.asarray(rgb, dtype=float)
    return 0.2126 * rgb[..., 0] + 0.7152 * rgb[..., 1] + 0.0722 * rgb[..., 2]


def test_weights_run_light_to_dark_and_the_image_palette_is_its_reverse():
    y = _luma(lut(WEIGHTS))
    assert np.all(np.diff(y) <= 0) and y[0] > 230 and y[-1] < 10
    np.testing.assert_array_equal(lut(WEIGHTS_ON_IMAGE), lut(WEIGHTS)[::-1])


def test_signed_palette_is_red_blue_with_a_light_centre():
    c = colors_for([0.0, 0.5, 1.0], SIGNED)
    assert c[0][0] > c[0][2]  # negative end is red
    assert c[2][2] > c[2][0]  # positive end is blue
    assert _luma(c[1]) > 230  # "no effect" is near white


def test_signed_to_unit_centres_zero_on_the_largest_magnitude():
    np.testing.assert_allclose(signed_to_unit([-2.0, 0.0, 1.0]), [0.0, 0.5, 0.75])
    np.testing.assert_allclose(signed_to_unit([0.0, 0.0]), [0.5, 0.5])


def test_hex_lut_matches_the_array():
    text = lut_hex(WEIGHTS)
    assert len(text) == 6 * LEVELS
    assert bytes.fromhex(text[:6]) == bytes(lut(WEIGHTS)[0])


def test_text_colour_and_unknown_palette():
    assert text_color((0, 0, 0)) == "#fff" and text_color((255, 255, 255)) == "#000"
    with pytest.raises(ValueError, match="unknown palette"):
        lut("no-such-map")
