"""The colour palettes every attnkit figure and page shares.

Weights (>= 0) are drawn with magma: ``WEIGHTS`` light -> dark on a page, ``WEIGHTS_ON_IMAGE``
dark -> bright over an image; signed contributions with ``SIGNED`` (ColorBrewer RdBu: red =
negative, blue = positive); weights beside signed views with greys (``WEIGHTS_BESIDE_SIGNED``).
`lut` samples a palette into ``LEVELS`` sRGB colours, the table the pages' JavaScript gets too
(docs/concepts.md, "Explanations you can see").
"""

from __future__ import annotations

import matplotlib
import numpy as np

WEIGHTS = "magma_r"
WEIGHTS_ON_IMAGE = "magma"
SIGNED = "RdBu"
WEIGHTS_BESIDE_SIGNED = "Greys"

# 128 levels: finer steps are invisible, and this sampling keeps magma_r's sRGB luminance
# strictly non-increasing (256 samples wobble by < 0.4 / 255 near the dark end).
LEVELS = 128


def lut(name: str, levels: int = LEVELS) -> np.ndarray:
    """``levels`` colours sampled evenly from matplotlib palette ``name``: uint8 ``[levels, 3]``.

    Raises:
        ValueError: ``name`` is not a matplotlib colormap.
    """
    if name not in matplotlib.colormaps:
        raise ValueError(f"unknown palette {name!r}; use a matplotlib colormap name")
    rgba = matplotlib.colormaps[name](np.linspace(0.0, 1.0, levels))
    return np.rint(rgba[:, :3] * 255.0).astype(np.uint8)


def lut_hex(name: str, levels: int = LEVELS) -> str:
    """The LUT as one string of ``levels`` six-digit hex colours (compact for JSON)."""
    return "".join(f"{r:02x}{g:02x}{b:02x}" for r, g, b in lut(name, levels).tolist())


def colors_for(unit_values, name: str = WEIGHTS, levels: int = LEVELS) -> np.ndarray:
    """The nearest LUT colour for each value in [0, 1] (clipped): uint8 ``[..., 3]``."""
    v = np.clip(np.asarray(unit_values, dtype=np.float64), 0.0, 1.0)
    return lut(name, levels)[np.rint(v * (levels - 1)).astype(np.int64)]


def signed_to_unit(values) -> np.ndarray:
    """Signed scores to [0, 1] for a diverging palette: 0 -> 0.5, +-max|v| -> 1 / 0.

    Dividing by the largest magnitude keeps the centre at "no effect" whatever the balance of
    positive and negative words.
    """
    v = np.asarray(values, dtype=np.float64)
    top = float(np.abs(v).max()) if v.size else 0.0
    return 0.5 + 0.5 * (v / top) if top > 0 else np.full(v.shape, 0.5)


def text_color(rgb) -> str:
    """``"#000"`` or ``"#fff"``, whichever reads better on background ``rgb`` (0-255)."""
    r, g, b = (float(c) for c in rgb)
    return "#fff" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 128 else "#000"
