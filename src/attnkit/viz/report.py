"""A self-contained HTML report: one file, no external assets, safe to e-mail or archive.

Figures are embedded as base64 PNG data URIs (or inline SVG); every user-provided string (title,
headings, text, captions, table cells) is HTML-escaped. Only ``add_section``'s ``html`` argument
and ``add_svg``'s SVG are inserted as given: pass fragments made by attnkit.viz
(``shade_text_html``, ``alignment_svg``) or escape them yourself.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from string import Template

import numpy as np
from matplotlib.figure import Figure

from attnkit.fileio import atomic_write_bytes
from attnkit.viz._save import figure_bytes, png_data_uri, to_numpy
from attnkit.viz.explorer import page_file

PAGE = Template(page_file("report.html"))


def _checked_image(image) -> np.ndarray:
    img = to_numpy(image, "image")
    if img.dtype != np.uint8 or not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] in (3, 4))):
        raise ValueError(f"image must be uint8 [H, W], [H, W, 3] or [H, W, 4], "
                         f"got {img.dtype} {list(img.shape)}")
    return img


class HtmlReport:
    """Collects headings, text, tables and figures; ``write`` saves one self-contained HTML file.

    Example:
        >>> r = HtmlReport("Caption run")
        >>> r.add_section("Alignment", alignment_svg(w, src, tgt))
        >>> r.add_figure(fig, caption="attention for 'duck'")
        >>> r.write("run/report.html")
    """

    def __init__(self, title: str):
        self.title = str(title)
        self._blocks: list[str] = []

    def add_section(self, heading: str, html_fragment: str = "") -> HtmlReport:
        """A ``<h2>`` heading (escaped) followed by a trusted HTML fragment (inserted as is)."""
        self._blocks.append(f"<h2>{html.escape(str(heading))}</h2>\n{html_fragment}")
        return self

    def add_text(self, text: str, *, preformatted: bool = False) -> HtmlReport:
        """A paragraph of escaped text (line breaks kept); ``preformatted`` uses ``<pre>``."""
        escaped = html.escape(str(text))
        self._blocks.append(f"<pre>{escaped}</pre>" if preformatted
                            else "<p>" + escaped.replace("\n", "<br>\n") + "</p>")
        return self

    def add_tokens(self, tokens_html: str) -> HtmlReport:
        """A line of shaded tokens from `attnkit.viz.text.shade_text_html` (trusted)."""
        self._blocks.append(f'<p class="attnkit-tokens">{tokens_html}</p>')
        return self

    def add_figure(self, figure: Figure | np.ndarray, *, caption: str | None = None,
                   dpi: int = 100) -> HtmlReport:
        """Embed a matplotlib Figure or a uint8 image ``[H, W, 3]`` as a base64 PNG."""
        uri = png_data_uri(figure_bytes(figure, "png", dpi=dpi) if isinstance(figure, Figure)
                           else _checked_image(figure))
        alt = html.escape(caption or "figure", quote=True)
        self._blocks.append(self._figure(f'<img src="{uri}" alt="{alt}">', caption))
        return self

    def add_svg(self, svg: str, *, caption: str | None = None) -> HtmlReport:
        """Embed inline SVG text (e.g. from `attnkit.viz.heatmap.alignment_svg`)."""
        svg = str(svg)
        if "<svg" not in svg:
            raise ValueError("add_svg expects SVG text containing an <svg> element")
        self._blocks.append(self._figure(svg[svg.index("<svg"):], caption))
        return self

    def add_table(self, rows: Sequence[Sequence[object]], *, header: Sequence[object] | None = None
                  ) -> HtmlReport:
        """A table of escaped cells (numbers are shown with ``str``)."""
        cells = [] if header is None else ["".join(f"<th>{html.escape(str(h))}</th>"
                                                   for h in header)]
        cells += ["".join(f"<td>{html.escape(str(c))}</td>" for c in row) for row in rows]
        self._blocks.append("\n".join(["<table>", *(f"<tr>{r}</tr>" for r in cells), "</table>"]))
        return self

    @staticmethod
    def _figure(body: str, caption: str | None) -> str:
        cap = "" if caption is None else f"<figcaption>{html.escape(str(caption))}</figcaption>"
        return f"<figure>\n{body}\n{cap}</figure>"

    def to_html(self) -> str:
        """The whole page as a string."""
        return PAGE.substitute(title=html.escape(self.title), body="\n".join(self._blocks))

    def write(self, path: str | os.PathLike) -> Path:
        """Write the page atomically (temp file + ``os.replace``); returns the path."""
        return atomic_write_bytes(path, self.to_html().encode("utf-8"))
