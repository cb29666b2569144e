import matplotlib
import numpy as np
import pytest
import torch

from attnkit.viz import attention_grid, overlay_image, upsample_map
from attnkit.viz.palettes import WEIGHTS_ON_IMAGE


def test_upsample_matches_torch_bilinear():
    rng = np.random.default_rng(1)
    m = rng.random((5, 7)).astype(np.float32)
    ours = upsample_map(m, 48, 64)
    ref = torch.nn.functional.interpolate(
        torch.from_numpy(m)[None, None], size=(48, 64), mode="bilinear", align_corners=False
    )[0, 0].numpy()
    np.testing.assert_allclose(ours, ref / ref.max(), atol=1e-4)


def test_peak_lands_in_its_cell():
    m = np.zeros((8, 8))
    m[2, 5] = 1.0
    up = upsample_map(m, 64, 64)
    r, c = np.unravel_index(np.argmax(up), up.shape)
    assert 16 <= r < 24 and 40 <= c < 48


def test_overlay_blend_is_exact():
    rng = np.random.default_rng(2)
    img = rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)
    m = rng.random((4, 5))
    np.testing.assert_array_equal(overlay_image(img, m, alpha=0.0), img)
    # The default colour map is now the shared palette (was "jet").
    heat = matplotlib.colormaps[WEIGHTS_ON_IMAGE](upsample_map(m, 32, 40))[..., :3] * 255
    out = overlay_image(img, torch.from_numpy(m), alpha=0.25)
    assert out.dtype == np.uint8 and out.shape == img.shape
    expected = 0.75 * img + 0.25 * heat
    assert np.abs(out.astype(float) - expected).max() <= 0.5 + 1e-6


def test_attention_grid_writes_png_with_word_titles(tmp_path):
    img = np.full((64, 64, 3), 200, np.uint8)
    maps = np.random.default_rng(3).random((3, 8, 8))
    words = ["a", "blue", "$duck"]
    fig = attention_grid(img, maps, words, tmp_path / "grid.png", cols=2)
    data = (tmp_path / "grid.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    # The grid now carries a colour bar; it is an Axes of its own, left out of the panel titles.
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == ["image", *words]
    assert len(fig.axes) == len(panels) + 1


def test_shape_errors():
    img = np.zeros((16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match=r"len\(words\) = 2"):
        attention_grid(img, np.ones((3, 4, 4)), ["a", "b"])
    with pytest.raises(ValueError, match=r"uint8 \[H, W, 3\]"):
        overlay_image(np.zeros((16, 16), np.uint8), np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"uint8 \[H, W, 3\]"):
        overlay_image(np.zeros((16, 16, 3), np.float32), np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"\[h, w\]"):
        overlay_image(img, np.ones(16))


def test_grid_colour_bar_uses_the_shared_palette():
    img = np.zeros((16, 16, 3), np.uint8)
    fig = attention_grid(img, np.ones((2, 4, 4)), ["a", "b"])
    bar = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bar) == 1 and "peak" in bar[0].get_ylabel()
    mesh = [c for c in bar[0].collections if getattr(c, "get_array", lambda: None)() is not None]
    assert [c.cmap.name for c in mesh] == [WEIGHTS_ON_IMAGE]
