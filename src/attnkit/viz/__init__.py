"""Figures and HTML from arrays: alignment heatmaps, shaded tokens, image overlays, reports.

Everything takes numpy arrays (or CPU tensors) and token lists, never a model or a run folder.
Figures are made with ``matplotlib.figure.Figure`` + an Agg canvas, so pyplot and the user's
backend choice are left alone.
"""

from attnkit.viz.heatmap import alignment_figure, alignment_svg, plot_alignment
from attnkit.viz.overlay import attention_grid, overlay_image, upsample_map
from attnkit.viz.report import HtmlReport
from attnkit.viz.text import normalize_scores, shade_text_ansi, shade_text_html

__all__ = [
    "HtmlReport",
    "alignment_figure",
    "alignment_svg",
    "attention_grid",
    "normalize_scores",
    "overlay_image",
    "plot_alignment",
    "shade_text_ansi",
    "shade_text_html",
    "upsample_map",
]
