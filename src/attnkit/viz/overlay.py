"""Spatial attention over an image, one panel per generated word (as in Show, Attend and Tell).

``overlay_image(image [H, W, 3] uint8, map [h, w]) -> uint8 [H, W, 3]`` upsamples the map
bilinearly to the image size and blends it (as a colour map) over the image.
``attention_grid(image, maps [n, h, w], words, path)`` writes a grid of such panels, titled by word,
with one colour bar. Colours: `attnkit.viz.palettes.WEIGHTS_ON_IMAGE` (perceptually uniform;
dark = not looked at, bright = the peak).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from PIL import Image

from attnkit.viz._save import as_paths, save_figure, to_numpy
from attnkit.viz.palettes import WEIGHTS_ON_IMAGE


def check_image(image) -> np.ndarray:
    """``image`` as uint8 ``[H, W, 3]``; a ValueError names the expected shape otherwise."""
    img = to_numpy(image, "image")
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(f"image must be uint8 [H, W, 3], got {img.dtype} {list(img.shape)}")
    return img


def check_maps(maps, words: Sequence[str], where: str = "") -> np.ndarray:
    """``maps`` as an array ``[n, h, w]``, one map per word; ValueError naming the shape."""
    m = to_numpy(maps, "maps")
    if m.ndim != 3 or m.shape[0] != len(words) or 0 in m.shape[1:]:
        raise ValueError(f"{where}maps must have shape [n, h, w] with n = len(words) = "
                         f"{len(words)}, got {list(m.shape)}")
    return m


def upsample_map(attention_map, height: int, width: int) -> np.ndarray:
    """Bilinearly resize a ``[h, w]`` map to ``[height, width]`` (the smooth blobs of Show, Attend
    and Tell, not blocky cells) and scale it to [0, 1] by its max.
    """
    m = to_numpy(attention_map, "map").astype(np.float32)
    if m.ndim != 2 or 0 in m.shape:
        raise ValueError(f"attention map must be [h, w], got {list(m.shape)}")
    if not np.all(np.isfinite(m)):
        raise ValueError("attention map contains NaN or infinity")
    # Pillow's float ("F") images resize bilinearly with pixel-centre alignment.
    up = np.asarray(Image.fromarray(m, mode="F").resize((width, height), Image.BILINEAR))
    up = np.clip(up, 0.0, None)
    top = float(up.max())
    return up / top if top > 0 else up


def overlay_image(image, attention_map, *, alpha: float = 0.5,
                  cmap: str = WEIGHTS_ON_IMAGE) -> np.ndarray:
    """``(1 - alpha) * image + alpha * cmap(map)``: uint8 ``[H, W, 3]``, the ``[h, w]`` map
    normalised by its max.

    Example:
        >>> out = overlay_image(np.zeros((64, 64, 3), np.uint8), np.eye(8))
    """
    img = check_image(image)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    m = upsample_map(attention_map, img.shape[0], img.shape[1])
    heat = matplotlib.colormaps[cmap](m)[..., :3] * 255.0
    out = (1.0 - alpha) * img.astype(np.float32) + alpha * heat
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def attention_grid(image, maps, words: Sequence[str],
                   path: str | os.PathLike | Sequence[str | os.PathLike] | None = None, *,
                   cols: int | None = None, alpha: float = 0.5, cmap: str = WEIGHTS_ON_IMAGE,
                   show_image: bool = True, dpi: int = 100) -> Figure:
    """One panel per word (``maps [n, h, w]``, ``n`` ``words``): its map over ``image``, each scaled
    by its own peak, with one colour bar; returns the Figure.

    ``path``: file(s) written atomically by extension (None: none); ``cols`` default ``min(n +
    show_image, 5)``; ``show_image`` puts the plain image first. ValueError for mismatched shapes.
    """
    img = check_image(image)
    m = check_maps(maps, words)
    paths = None if path is None else as_paths(path)
    panels = [("image", img)] if show_image else []
    panels += [(str(w), overlay_image(img, m[i], alpha=alpha, cmap=cmap))
               for i, w in enumerate(words)]
    if cols is None:
        cols = min(len(panels), 5)
    if cols < 1:
        raise ValueError(f"cols must be >= 1, got {cols}")
    rows = max(1, math.ceil(len(panels) / cols))
    side = 2.2
    # Constrained layout leaves room for the shared colour bar beside the panels.
    fig = Figure(figsize=(cols * side + 0.9, rows * (side + 0.35)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = []
    for k, (title, panel) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.imshow(panel, interpolation="bilinear")
        ax.set_title(title, fontsize=11)
        ax.title.set_parse_math(False)
        ax.axis("off")
        axes.append(ax)
    bar = ScalarMappable(norm=Normalize(0.0, 1.0), cmap=cmap)
    fig.colorbar(bar, ax=axes, shrink=min(1.0, 0.9 / rows + 0.1), pad=0.02,
                 label="attention / the word's peak")
    if paths:
        save_figure(fig, paths, dpi=dpi)
    return fig
