import xml.etree.ElementTree as ET

import matplotlib
import numpy as np
import pytest
import torch

from attnkit.viz import alignment_svg, plot_alignment

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _svg_text(svg: str) -> str:
    root = ET.fromstring(svg)
    return " ".join("".join(el.itertext()) for el in root.iter() if el.tag.endswith("text"))


def test_writes_png_and_svg_with_token_labels(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.random((3, 4))
    src, tgt = ["le", "chat", "$5", "<eos>"], ["the", "cat", "R&D"]
    paths = [tmp_path / "a.png", tmp_path / "sub" / "a.svg"]
    fig = plot_alignment(w, src, tgt, paths, title="fr -> en")
    png = paths[0].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    text = _svg_text(paths[1].read_text(encoding="utf-8"))
    for tok in src + tgt:
        assert tok in text  # literal: "$5" not mathtext, "<eos>" escaped then parsed back
    # The drawn matrix is exactly the weights (rows = target, columns = source).
    np.testing.assert_allclose(np.asarray(fig.axes[0].images[0].get_array()), w)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "sub"]  # no temp files left


def test_accepts_cpu_tensor_and_no_path():
    w = torch.softmax(torch.randn(2, 5), dim=-1)
    fig = plot_alignment(w, list("abcde"), ["x", "y"])
    np.testing.assert_allclose(np.asarray(fig.axes[0].images[0].get_array()), w.numpy(), 1e-6)


def test_figure_grows_with_tokens_and_labels_stay_legible():
    small = plot_alignment(np.ones((3, 3)), list("abc"), list("xyz"))
    n = 40
    big = plot_alignment(np.ones((n, n)), [f"s{i}" for i in range(n)], [f"t{i}" for i in range(n)])
    assert big.get_figwidth() > small.get_figwidth()
    assert big.get_figheight() > small.get_figheight()
    ax = big.axes[0]
    font_pt = ax.get_yticklabels()[0].get_fontsize()
    cell_pt = 72 * (big.get_figheight() - 2.0) / n
    assert 5 <= font_pt < cell_pt  # one label per row fits without touching its neighbours


def test_shape_mismatch_names_both_counts():
    with pytest.raises(ValueError, match=r"len\(target_tokens\)=2.*len\(source_tokens\)=3"):
        plot_alignment(np.ones((3, 2)), list("abc"), list("xy"))
    with pytest.raises(ValueError, match="shape"):
        plot_alignment(np.ones(6), list("abc"), list("xy"))
    with pytest.raises(ValueError, match="at least one"):
        plot_alignment(np.ones((0, 3)), list("abc"), [])
    with pytest.raises(ValueError, match="NaN"):
        plot_alignment(np.full((2, 3), np.nan), list("abc"), list("xy"))


def test_bad_extension(tmp_path):
    with pytest.raises(ValueError, match="extension"):
        plot_alignment(np.ones((1, 1)), ["a"], ["b"], tmp_path / "a.gif")
    assert not list(tmp_path.iterdir())


def test_alignment_svg_is_inline_svg():
    svg = alignment_svg(np.eye(2), ["<b>", "b"], ["c", "d"])
    assert svg.startswith("<svg") and "<?xml" not in svg and "DOCTYPE" not in svg
    assert "&lt;b&gt;" in svg
    assert "<b>" in _svg_text(svg)


def test_leaves_global_backend_alone():
    before = matplotlib.get_backend()
    plot_alignment(np.ones((1, 1)), ["a"], ["b"])
    assert matplotlib.get_backend() == before


def test_long_inputs_stay_screen_sized_with_thinned_labels_and_a_whole_title():
    n = 200
    title = "a very long title about the alignment of this long sentence " * 3
    fig = plot_alignment(np.ones((n, n)) / n, [f"s{i}" for i in range(n)],
                         [f"t{i}" for i in range(n)], title=title)
    assert fig.get_figwidth() <= 16 + 2.5 and fig.get_figheight() <= 16 + 2.0  # not 6000 px
    ax = fig.axes[0]
    labels = ax.get_xticklabels()
    assert 20 <= len(labels) < n  # every k-th token labelled
    assert labels[1].get_text() == f"s{ax.get_xticks()[1]}"
    assert ax.get_yticklabels()[0].get_fontsize() >= 6
    renderer = fig.canvas.get_renderer()
    box = ax.title.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width  # wrapped, not cut off
    assert "one label every" in ax.get_xlabel()
