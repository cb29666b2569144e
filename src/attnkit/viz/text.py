"""Tokens shaded by a score (attention weight, saliency): for terminals and for HTML.

Scores are normalised by their maximum, so the most-attended token is fully shaded; negative
scores count as 0. ``shade_text_ansi`` gives darker backgrounds for higher scores;
``shade_text_html`` gives ``<span>`` elements whose background alpha is the normalised score.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from attnkit.viz._save import to_numpy

# 24-bit shading runs from white (score 0) to this dark blue (score 1).
_LIGHT = np.array([255.0, 255.0, 255.0])
_DARK = np.array([8.0, 48.0, 107.0])
# HTML spans: this colour with alpha = normalised score over the page background.
_HTML_RGB = (255, 99, 71)


def normalize_scores(tokens: Sequence[str], scores) -> np.ndarray:
    """Scores ``[T]`` divided by their max and clipped to [0, 1] (all-zero stays zero).

    Raises:
        ValueError: ``scores`` is not 1-D with ``len(tokens)`` entries, or is not finite.
    """
    s = to_numpy(scores, "scores").astype(np.float64)
    if s.ndim != 1 or s.shape[0] != len(tokens):
        raise ValueError(
            f"scores must have shape [T] = [len(tokens)={len(tokens)}], got {list(s.shape)}"
        )
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or infinity")
    s = np.clip(s, 0.0, None)
    top = s.max() if s.size else 0.0
    return s / top if top > 0 else s


def _fg_for(rgb: np.ndarray) -> str:
    # Light text on dark backgrounds, by relative luminance, so tokens stay readable.
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "97" if luminance < 128 else "30"


def shade_text_ansi(
    tokens: Sequence[str],
    scores,
    *,
    color: bool = True,
    truecolor: bool = True,
    sep: str = " ",
) -> str:
    """Tokens with ANSI background shading: darker = higher score.

    Args:
        tokens: ``T`` strings.
        scores: ``[T]`` numbers (numpy, list or CPU tensor); normalised by their max.
        color: False gives plain text ``token(0.42)`` with the normalised score, for logs/pipes.
        truecolor: 24-bit colours (white -> dark blue); False uses the 256-colour grey ramp.
        sep: joins the tokens.

    Returns:
        One string; every shaded token ends with a reset code, so nothing leaks into later text.

    Example:
        >>> print(shade_text_ansi(["the", "duck"], [0.1, 0.9]))
    """
    s = normalize_scores(tokens, scores)
    if not color:
        return sep.join(f"{t}({v:.2f})" for t, v in zip(tokens, s, strict=True))
    parts = []
    for t, v in zip(tokens, s, strict=True):
        if truecolor:
            rgb = np.rint(_LIGHT + (_DARK - _LIGHT) * v)
            bg = f"48;2;{int(rgb[0])};{int(rgb[1])};{int(rgb[2])}"
        else:
            # Grey ramp 232 (darkest) .. 255 (lightest): 24 steps.
            level = 23 - int(round(v * 23))
            bg = f"48;5;{232 + level}"
            grey = 8 + 10 * level
            rgb = np.array([grey, grey, grey], dtype=float)
        parts.append(f"\x1b[{bg};{_fg_for(rgb)}m{t}\x1b[0m")
    return sep.join(parts)


def shade_text_html(tokens: Sequence[str], scores, *, sep: str = " ", digits: int = 4) -> str:
    """Tokens as ``<span>`` elements whose background alpha is the normalised score.

    Args:
        tokens: ``T`` strings (HTML-escaped in the output).
        scores: ``[T]`` numbers; normalised by their max.
        sep: joins the spans.
        digits: decimals of the raw score shown in each span's ``title`` (hover) attribute.

    Returns:
        An HTML fragment, e.g. ``<span class="attnkit-token" style="background-color:
        rgba(255,99,71,0.500)" title="0.2500">duck</span>``.
    """
    s = normalize_scores(tokens, scores)
    raw = to_numpy(scores, "scores").astype(np.float64)
    r, g, b = _HTML_RGB
    spans = []
    for t, v, x in zip(tokens, s, raw, strict=True):
        spans.append(
            f'<span class="attnkit-token" style="background-color: rgba({r},{g},{b},{v:.3f});'
            f' padding: 0 2px; border-radius: 3px" title="{x:.{digits}f}">'
            f"{html.escape(str(t))}</span>"
        )
    return sep.join(spans)
