"""Figures and HTML from arrays: alignment heatmaps, shaded tokens, image overlays, reports, and
one interactive, self-contained attention explorer page per app (``translation_page``,
``sentiment_page``, ``caption_page``).

Everything takes numpy arrays (or CPU tensors) and token lists, never a model or a run folder.
Figures are made with ``matplotlib.figure.Figure`` + an Agg canvas, so pyplot and the user's
backend choice are left alone.
"""

from attnkit.viz.caption_page import CaptionExample, caption_page
from attnkit.viz.heatmap import alignment_figure, alignment_svg, plot_alignment
from attnkit.viz.overlay import attention_grid, overlay_image, upsample_map
from attnkit.viz.report import HtmlReport
from attnkit.viz.sentiment_page import Review, TokenView, sentiment_page
from attnkit.viz.spans import token_spans
from attnkit.viz.text import normalize_scores, shade_text_ansi, shade_text_html
from attnkit.viz.translation_page import TranslationExample, translation_page

__all__ = [
    "CaptionExample", "HtmlReport", "Review", "TokenView", "TranslationExample",
    "alignment_figure", "alignment_svg", "attention_grid", "caption_page", "normalize_scores",
    "overlay_image", "plot_alignment", "sentiment_page", "shade_text_ansi", "shade_text_html",
    "token_spans", "translation_page", "upsample_map",
]
