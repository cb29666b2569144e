"""Alignment heatmaps: which source token each target token attended to.

``plot_alignment(weights [Tq, Tk], source_tokens, target_tokens, path_or_paths)`` draws the matrix
with source tokens on x (rotated) and target tokens on y, plus a colour bar, and writes PNG / SVG /
PDF by extension. ``alignment_svg`` returns the same picture as inline SVG text for HTML reports.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attnkit.viz._save import as_paths, figure_bytes, save_figure, to_numpy
from attnkit.viz.palettes import WEIGHTS

# One token row/column gets this many inches while the figure fits MAX_SIDE; labels are sized to
# the cell so that neighbouring labels never overlap (0.28 in = 20 pt per cell, font 8 pt).
# MAX_SIDE keeps a 200-token sentence at a screen-sized 1600 px (at 100 dpi), not 6000 px.
CELL_INCHES = 0.28
MAX_SIDE_INCHES = 16.0
MIN_SIDE_INCHES = 3.0
# Below this font a label is unreadable: we show every k-th label instead of shrinking further.
MIN_FONT_PT = 6.0


def check_alignment(weights, source_tokens: Sequence[str], target_tokens: Sequence[str]
                    ) -> np.ndarray:
    """``weights`` as a float array ``[Tq, Tk]``; ValueError naming the expected shape."""
    w = to_numpy(weights, "weights")
    tq, tk = len(target_tokens), len(source_tokens)
    if w.ndim != 2 or w.shape != (tq, tk):
        raise ValueError(f"weights must have shape [Tq, Tk] = [len(target_tokens)={tq}, "
                         f"len(source_tokens)={tk}], got {list(w.shape)}")
    if tq == 0 or tk == 0:
        raise ValueError(f"need at least one source and one target token, got [{tq}, {tk}]")
    w = w.astype(np.float64)
    if not np.all(np.isfinite(w)):
        raise ValueError("weights contain NaN or infinity")
    return w


def alignment_figure(weights, source_tokens: Sequence[str], target_tokens: Sequence[str], *,
                     title: str | None = None, cmap: str = WEIGHTS) -> Figure:
    """The alignment heatmap Figure of ``weights [Tq, Tk]`` (row ``i``: target token ``i``).

    The figure grows with the token counts up to ``MAX_SIDE_INCHES``, then the cells shrink; once
    a label would be under ``MIN_FONT_PT`` only every k-th token is labelled. ``cmap`` defaults to
    the weights palette.
    """
    w = check_alignment(weights, source_tokens, target_tokens)
    tq, tk = w.shape
    cell = min(CELL_INCHES, MAX_SIDE_INCHES / max(tq, tk, 1))
    font = float(np.clip(cell * 72 * 0.42, MIN_FONT_PT, 10.0))
    # Show every k-th token label so that a MIN_FONT_PT label fits in k cells.
    step = max(1, math.ceil(MIN_FONT_PT * 1.2 / (cell * 72)))
    width = max(MIN_SIDE_INCHES, tk * cell + 2.5)  # + room for y labels and the colour bar
    height = max(MIN_SIDE_INCHES, tq * cell + 2.0)  # + room for rotated x labels and title

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # an Agg canvas of its own: no pyplot, no global backend switch
    ax = fig.add_subplot(1, 1, 1)
    vmax = float(w.max()) if w.size and w.max() > 0 else 1.0
    image = ax.imshow(w, cmap=cmap, aspect="equal", interpolation="nearest", vmin=0.0, vmax=vmax)
    for axis, tokens in (("x", source_tokens), ("y", target_tokens)):
        pos = range(0, len(tokens), step)
        getattr(ax, f"set_{axis}ticks")(pos)
        # parse_math=False: tokens such as "$5" must be shown literally, not as mathtext.
        getattr(ax, f"set_{axis}ticklabels")([str(tokens[i]) for i in pos], fontsize=font,
                                             parse_math=False, rotation=90 if axis == "x" else 0)
    every = "" if step == 1 else f" (one label every {step} tokens)"
    ax.set_xlabel("source" + every)
    ax.set_ylabel("target")
    ax.tick_params(length=0)
    if title is not None:
        title_pt = max(font, 9.0)
        # Wrap to the figure width (a character is about 0.55 em) so the title is never cut.
        chars = max(20, int(width * 72 / (0.55 * title_pt)))
        ax.set_title(textwrap.fill(str(title), chars), fontsize=title_pt)
        ax.title.set_parse_math(False)
    # A bar about 0.35 in wide whatever the figure size (a fixed fraction grows with the figure).
    fig.colorbar(image, ax=ax, fraction=min(0.046, 0.35 / width), pad=0.02,
                 label="attention weight")
    return fig


def plot_alignment(weights, source_tokens: Sequence[str], target_tokens: Sequence[str],
                   path_or_paths: str | os.PathLike | Iterable[str | os.PathLike] | None = None, *,
                   title: str | None = None, cmap: str = WEIGHTS, dpi: int = 100) -> Figure:
    """Draw ``weights [Tq, Tk]`` (rows: target tokens, columns: source) and return the Figure.

    Each of ``path_or_paths`` (None: none) is written atomically in the format of its extension
    (.png, .svg, .pdf). ValueError for a mismatched shape or an unsupported extension.

    Example:
        >>> fig = plot_alignment(np.full((2, 3), 1 / 3), ["a", "b", "c"], ["x", "y"], "al.png")
    """
    paths = None if path_or_paths is None else as_paths(path_or_paths)
    fig = alignment_figure(weights, source_tokens, target_tokens, title=title, cmap=cmap)
    if paths:
        save_figure(fig, paths, dpi=dpi)
    return fig


def alignment_svg(weights, source_tokens: Sequence[str], target_tokens: Sequence[str], *,
                  title: str | None = None, cmap: str = WEIGHTS) -> str:
    """The alignment heatmap as an inline ``<svg>...</svg>`` string (no XML prolog), for HTML.

    Shapes as in `plot_alignment`. Token labels are kept as SVG ``<text>`` elements.
    """
    fig = alignment_figure(weights, source_tokens, target_tokens, title=title, cmap=cmap)
    text = figure_bytes(fig, "svg").decode("utf-8")
    # Inline SVG inside HTML must not carry the <?xml?> prolog or DOCTYPE.
    return text[text.index("<svg"):]
